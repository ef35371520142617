"""Host-clock helpers of the timed loop: the calibration busy-wait and step statistics (ms).

Pure and torch-free: the statistics are the rank record's ``step_time_ms`` keys
(:data:`ddpbench.formats.rank_record.STEP_STAT_KEYS`).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Sequence


def busy_wait(seconds: float) -> None:
    """Spin on ``time.perf_counter`` for ``seconds``.

    A sleep would add the scheduler's wake-up latency and timer slack (tens of µs to ms, varying
    with load), so the added cost would not be the known amount.
    """
    if seconds <= 0:
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """``q``-th percentile (0..100) of already sorted values, linear interpolation (numpy's default)."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of no values")
    pos = (n - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def step_time_stats(durations_s: Sequence[float]) -> dict[str, float]:
    """Statistics of durations (seconds in) in milliseconds: the schema's ``step_time_ms`` keys."""
    ms = sorted(d * 1000.0 for d in durations_s)
    return {
        "mean": statistics.fmean(ms),
        "median": percentile(ms, 50),
        "p10": percentile(ms, 10),
        "p90": percentile(ms, 90),
        "p99": percentile(ms, 99),
        "min": ms[0],
        "max": ms[-1],
        "stdev": statistics.stdev(ms) if len(ms) > 1 else 0.0,
    }


def phase_stats(names: Sequence[str], durations_s: Sequence[float], phases_s: Sequence[Sequence[float]]) -> dict[str, dict[str, float]]:
    """Per-phase statistics in ms: ``names[:-1]`` are the timed phases (one tuple of seconds per step in
    ``phases_s``), ``names[-1]`` is the rest of each step (its duration minus its timed phases, floored at 0)."""
    columns = [list(column) for column in zip(*phases_s)]
    rest = [max(0.0, total - sum(parts)) for total, parts in zip(durations_s, phases_s)]
    return {name: step_time_stats(values) for name, values in zip(names, [*columns, rest])}
