"""Host-clock helpers of the timed loop: the calibration wait and step statistics (ms).

Pure and torch-free: the statistics are the rank record's ``step_time_ms`` keys
(:data:`ddpbench.formats.rank_record.STEP_STAT_KEYS`).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Sequence


SPIN_TAIL_S = 0.0002
"""Seconds :func:`wait_until_known` spins at the end of an injected wait (it sleeps before that).

0.2 ms: about twice an idle machine's wake-up latency. A longer tail does not help on a loaded
machine, where spinning gets the process preempted: waiting 5 ms on a 2-core VM at load 8 took
5.22 ms (mean of 300) sleeping only, 5.34 ms with this tail, 6.21 ms with a 1 ms tail and 11.8 ms
spinning throughout (docs/accuracy.md)."""


def wait_until_known(seconds: float, spin_tail_s: float = SPIN_TAIL_S) -> None:
    """Wait ``seconds`` of wall time: sleep until ``spin_tail_s`` before the deadline, then spin on ``time.perf_counter``.

    The calibration's injected per-step cost. Sleeping most of it leaves the cores to the peers
    (gloo's threads, the node agent, the driver, other processes) as a real tool's waiting would,
    instead of holding both cores of a small machine; spinning the last part absorbs the
    scheduler's wake-up latency and timer slack (tens of µs), so the wait ends on time.
    A wake-up later than ``spin_tail_s`` (a loaded machine) makes the wait that much longer.
    """
    if seconds <= 0:
        return
    end = time.perf_counter() + seconds
    while True:
        left = end - time.perf_counter()
        if left <= spin_tail_s:
            break
        time.sleep(left - spin_tail_s)
    while time.perf_counter() < end:
        pass


class InjectedWait:
    """The calibration's injected per-step cost: ``seconds`` of wall time per call, on average exactly.

    Each call waits with :func:`wait_until_known`, shortened by what earlier calls overran (error
    feedback): a wake-up that came late on a loaded machine is paid back on the next steps, so
    the wait summed over a run is ``calls × seconds`` to within one call's overrun, whatever the
    load. On an idle machine the overrun is a few µs and every call waits ``seconds``.
    """

    def __init__(self, seconds: float, spin_tail_s: float = SPIN_TAIL_S) -> None:
        self.seconds = seconds
        self.spin_tail_s = spin_tail_s
        # seconds waited so far beyond calls × seconds (positive: owed back)
        self.overrun_s = 0.0

    def __call__(self) -> None:
        if self.seconds <= 0:
            return
        t0 = time.perf_counter()
        wait_until_known(max(0.0, self.seconds - self.overrun_s), self.spin_tail_s)
        self.overrun_s += time.perf_counter() - t0 - self.seconds


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
