"""Host-clock helpers of the timed loop: the calibration wait and step statistics (ms, the rank record's
``step_time_ms`` keys). Pure and torch-free."""

from __future__ import annotations

import statistics
import time
from typing import Sequence


SPIN_TAIL_S = 0.0002
"""Seconds :func:`wait_until_known` spins at the end of an injected wait, after sleeping: about twice an idle
machine's wake-up latency (longer tails measured: docs/accuracy.md)."""


def wait_until_known(seconds: float, spin_tail_s: float = SPIN_TAIL_S) -> None:
    """Wait ``seconds`` of wall time: sleep until ``spin_tail_s`` before the deadline (the peers keep the cores),
    then spin on ``time.perf_counter`` (absorbing the wake-up latency). A later wake-up makes the wait longer."""
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
    """The calibration's injected per-step cost: ``seconds`` of wall time per call, on average exactly: each call's
    :func:`wait_until_known` is shortened by what earlier calls overran, so a run waits ``calls × seconds``."""

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
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
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


def phase_stats(names: Sequence[str], durations_s: Sequence[float],
                phases_s: Sequence[Sequence[float]]) -> dict[str, dict[str, float]]:
    """Per-phase statistics in ms: ``names[:-1]`` are the timed phases (one tuple of seconds per step in
    ``phases_s``), ``names[-1]`` is the rest of each step (its duration minus its timed phases, floored at 0)."""
    columns = [list(column) for column in zip(*phases_s)]
    rest = [max(0.0, total - sum(parts)) for total, parts in zip(durations_s, phases_s)]
    return {name: step_time_stats(values) for name, values in zip(names, [*columns, rest])}
