"""What a tool costs a job of a stated length: its per-step cost all along, its fixed cost once. Pure.

Per pair: ``projected_overhead_pct = s + 100 · F / T`` (% of the job): s the per-step overhead (%), F the start-up Δ
+ teardown Δ (s), T the job's training time (s). Reasoning: docs/analysis.md."""

from __future__ import annotations

import math
from typing import Sequence

from ddpbench.analysis.metrics import PairMetric
from ddpbench.analysis.results import PairRecord

#: the job length the report projects onto when none is given, hours of training
JOB_HOURS = 1.0
#: the per-pair metric of the projection
PROJECTED = PairMetric.projected_overhead_pct
PROJECTION_METHOD = ("per pair: step_overhead_pct + 100 * (startup_diff_s + teardown_diff_s) / (job_hours * 3600); "
                     "Student's paired t interval of these values (the covariance of the two parts included)")


def job_seconds(job_hours: float) -> float:
    """``job_hours`` in seconds; ValueError unless it is a finite number > 0."""
    if not (isinstance(job_hours, (int, float)) and math.isfinite(job_hours) and job_hours > 0):
        raise ValueError(f"job hours must be a number > 0, got {job_hours!r}")
    return 3600.0 * float(job_hours)


def projected_pct(step_pct: float, fixed_s: float, job_s: float) -> float:
    """The overhead of a ``job_s``-second job, % of its time: per-step % all along plus ``fixed_s`` once (NaN when
    either is unknown)."""
    if not (math.isfinite(step_pct) and math.isfinite(fixed_s)):
        return math.nan
    return step_pct + 100.0 * fixed_s / job_s


def projected_values(step_pcts: Sequence[float], fixed_s: Sequence[float], job_s: float) -> list[float]:
    """Each pair's :func:`projected_pct` (the sequences are per pair, in the same order)."""
    return [projected_pct(s, f, job_s) for s, f in zip(step_pcts, fixed_s, strict=True)]


def pair_value(pair: PairRecord, metric: str, job_s: float) -> float:
    """One pair's value of ``metric``: a :class:`PairRecord` field, or :data:`PROJECTED` for a ``job_s`` job."""
    if metric == PROJECTED:
        return projected_pct(pair.step_overhead_pct, pair.fixed_diff_s, job_s)
    return float(getattr(pair, metric))
