"""The verdict's rule (ddpbench.analysis.verdict) on known intervals: which figures may decide, and which did."""

from __future__ import annotations

import math

import pytest

from ddpbench.analysis.stats import paired_summary
from ddpbench.analysis.switching import SwitchedEstimate
from ddpbench.analysis.verdict import LOWER_BOUND, Figure, assumption_holds, combine, verdict_for
from ddpbench.choices import Verdict

BUDGET = 2.0


def summary(center: float, spread: float = 0.5) -> object:
    """A paired summary of four values around ``center``: its t interval is about ±1.6 · spread."""
    return paired_summary([center - spread, center, center + spread, center])


def switched(pct: float, low: float, high: float) -> SwitchedEstimate:
    return SwitchedEstimate(n_trials=5, quads=100, overhead_ms=pct / 10, ci_low_ms=low / 10, ci_high_ms=high / 10,
                            off_step_ms=10.0, overhead_pct=pct, ci_low_pct=low, ci_high_pct=high, method="pooled",
                            df=95.0, heterogeneity_p=0.5)


def test_whole_cost_figures_decide_within_and_over_and_name_themselves() -> None:
    within = verdict_for({"step_overhead_pct": summary(0.5), "projected_overhead_pct": summary(0.7)}, BUDGET)
    assert within.status == Verdict.within and within.decided_by == ("step_overhead_pct", "projected_overhead_pct")
    over = verdict_for({"step_overhead_pct": summary(1.0, 2.0), "projected_overhead_pct": summary(5.0)}, BUDGET)
    assert over.status == Verdict.over and over.decided_by == ("projected_overhead_pct",)
    assert "decided by: projected onto the job" in over.reason
    straddle = verdict_for({"step_overhead_pct": summary(2.0), "projected_overhead_pct": summary(2.1)}, BUDGET)
    assert straddle.status == Verdict.inconclusive and straddle.decided_by == () and "decided by" not in straddle.reason


def test_the_within_trial_lower_bound_can_prove_over_but_never_within() -> None:
    metrics = {"step_overhead_pct": summary(3.0, 3.0), "projected_overhead_pct": summary(3.2, 3.0)}
    assert verdict_for(metrics, BUDGET).status == Verdict.inconclusive
    over = verdict_for(metrics, BUDGET, switched(3.0, 2.4, 3.6))
    assert over.status == Verdict.over and over.decided_by == (LOWER_BOUND,) and over.per_metric[LOWER_BOUND] == Verdict.over
    assert "within-trial lower bound" in over.reason
    low = {"step_overhead_pct": summary(3.0, 3.0), "projected_overhead_pct": summary(3.2, 3.0)}
    below = verdict_for(low, BUDGET, switched(0.5, 0.2, 0.8))  # wholly below the budget: still no "within"
    assert below.status == Verdict.inconclusive and below.per_metric[LOWER_BOUND] == Verdict.inconclusive


def test_a_switching_sweep_weighs_the_whole_cost_and_the_lower_bound_together() -> None:
    metrics = {"step_overhead_pct": summary(4.0), "projected_overhead_pct": summary(4.2)}
    v = verdict_for(metrics, BUDGET, switched(1.5, 1.2, 1.8))
    assert v.status == Verdict.over and set(v.per_metric) == {"step_overhead_pct", "projected_overhead_pct", LOWER_BOUND}
    assert v.decided_by == ("step_overhead_pct", "projected_overhead_pct") and v.assumption_holds is True


def test_a_contradicted_assumption_leaves_the_lower_bound_out() -> None:
    metrics = {"step_overhead_pct": summary(0.3, 0.2), "projected_overhead_pct": summary(0.5, 0.2)}
    v = verdict_for(metrics, BUDGET, switched(3.0, 2.5, 3.5))  # the per-step interval lies wholly below it
    assert v.assumption_holds is False and LOWER_BOUND not in v.per_metric
    assert v.status == Verdict.within and "not used" in v.reason


def test_assumption_check_needs_both_intervals() -> None:
    on = Figure("step_overhead_pct", 1.0, 0.5, 1.5, 4, True)
    assert assumption_holds(on, Figure(LOWER_BOUND, 1.2, 0.9, 1.5, 5, False)) is True
    assert assumption_holds(on, Figure(LOWER_BOUND, 3.0, 2.0, 4.0, 5, False)) is False
    assert assumption_holds(on, None) is None
    assert assumption_holds(on, Figure(LOWER_BOUND, 3.0, math.nan, math.nan, 1, False)) is None


def test_a_figure_without_an_interval_decides_nothing() -> None:
    v = combine([Figure("step_overhead_pct", 9.0, math.nan, math.nan, 1, True)], BUDGET)
    assert v.status == Verdict.inconclusive and "no interval (n=1)" in v.reason


@pytest.mark.parametrize("missing", ["projected_overhead_pct", "step_overhead_pct"])
def test_an_unmeasured_whole_cost_figure_is_named_and_left_out(missing: str) -> None:
    metrics = {"step_overhead_pct": summary(0.5), "projected_overhead_pct": summary(0.6)}
    metrics[missing] = paired_summary([])
    v = verdict_for(metrics, BUDGET)
    assert v.status == Verdict.within and f"{missing} unknown (no pair measured it)" in v.reason
