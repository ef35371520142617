"""The verdict against the budget: every figure that may decide, the rule, and which figure decided. Pure.

**over** when any usable figure lies wholly above the budget, **within** when every whole-cost figure lies wholly
below it, else **inconclusive**. Figures and error rates: docs/analysis.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from ddpbench.analysis.metrics import PairMetric, pair_metric
from ddpbench.analysis.projection import PROJECTED
from ddpbench.analysis.results import BudgetVerdict
from ddpbench.analysis.stats import PairedSummary
from ddpbench.analysis.switching import SwitchedEstimate
from ddpbench.choices import Verdict

#: the whole-cost figures, the per-step one first
WHOLE_COST = (PairMetric.step_overhead_pct, PROJECTED)
#: the within-trial figure, a lower bound on the tool's per-step cost, and what the verdict calls it
LOWER_BOUND = "switched_overhead_pct"
LOWER_BOUND_NAME = "within-trial lower bound"


def figure_name(metric: str) -> str:
    """What the verdict's words call the figure ``metric`` (a name it does not know: the name itself)."""
    spec = pair_metric(metric)
    if spec is not None and spec.verdict_name is not None:
        return spec.verdict_name
    return LOWER_BOUND_NAME if metric == LOWER_BOUND else metric


@dataclass(frozen=True)
class Figure:
    """One figure the verdict may use: its interval (% of the step), pairs, and whether it is the whole cost (may
    decide ``within`` too) or a lower bound (``over`` only)."""

    metric: str
    mean: float
    low: float
    high: float
    n: int
    whole_cost: bool

    @property
    def has_interval(self) -> bool:
        """Whether the figure has a finite interval (two pairs or more)."""
        return math.isfinite(self.low) and math.isfinite(self.high)

    def status(self, budget_pct: float) -> Verdict:
        """``over`` when the interval lies wholly above ``budget_pct``, ``within`` wholly below (whole-cost figures
        only), else ``inconclusive``."""
        if not self.has_interval:
            return Verdict.inconclusive
        if self.low > budget_pct:
            return Verdict.over
        if self.high < budget_pct and self.whole_cost:
            return Verdict.within
        return Verdict.inconclusive

    def text(self) -> str:
        """``+x.xx % [lo, hi]`` or ``no interval (n=k)``."""
        if not self.has_interval:
            return f"no interval (n={self.n})"
        return f"{self.mean:+.2f} % [{self.low:+.2f}, {self.high:+.2f}]"


def assumption_holds(per_step: Figure | None, lower_bound: Figure | None) -> bool | None:
    """Whether "what stays on costs nothing negative" survives the data: the between-trial per-step interval does
    not lie wholly below the within-trial interval. None when either figure lacks an interval."""
    if per_step is None or lower_bound is None or not (per_step.has_interval and lower_bound.has_interval):
        return None
    return not per_step.high < lower_bound.low


def combine(figures: Sequence[Figure], budget_pct: float, assumption: bool | None = None,
            bound_confidence: float | None = None) -> BudgetVerdict:
    """The verdict from ready figures; ``assumption`` False lists the lower bounds as ``not used``;
    ``bound_confidence``: the level of the lower bound's interval, recorded with it."""
    used = [f for f in figures if f.whole_cost or assumption is not False]
    per = {f.metric: f.status(budget_pct) for f in used}
    over = [f for f in used if per[f.metric] == Verdict.over]
    whole = [f for f in used if f.whole_cost]
    if over:
        status, deciding = Verdict.over, over
    elif whole and all(per[f.metric] == Verdict.within for f in whole):
        status, deciding = Verdict.within, whole
    else:
        status, deciding = Verdict.inconclusive, []
    parts = [f"{f.metric} {f.text()} % is {per[f.metric]}" if f.has_interval else f"{f.metric} has {f.text()}"
             for f in used]
    parts += [f"{f.metric} {f.text()} not used: the between-trial per-step figure lies below it, so what stays on "
              "is not free" for f in figures if f not in used]
    reason = f"budget {budget_pct:g} %: " + "; ".join(parts)
    if deciding:
        reason += "; decided by: " + ", ".join(figure_name(f.metric) for f in deciding)
    bound = next((f for f in figures if not f.whole_cost), None)
    return BudgetVerdict(status, budget_pct, reason, per, tuple(f.metric for f in deciding),
                   None if assumption is None else bool(assumption),
                   (bound.mean, bound.low, bound.high) if bound is not None else None,
                   bound_confidence if bound is not None else None)


def lower_bound_confidence(confidence: float) -> float:
    """The level of the lower bound's interval for a verdict at ``confidence``: 1 − α/2 (the error rates above)."""
    return 1.0 - (1.0 - confidence) / 2.0


def verdict_for(metrics: Mapping[str, PairedSummary], budget_pct: float,
                switched: SwitchedEstimate | None = None, bound_confidence: float | None = None) -> BudgetVerdict:
    """The verdict on every figure that may decide against ``budget_pct``: the whole-cost ``metrics``
    (:data:`WHOLE_COST`) that some pair measured, and the within-trial figure ``switched`` (:data:`LOWER_BOUND`, its
    interval at :func:`lower_bound_confidence`) when the trials switched."""
    whole = [Figure(m, s.mean, s.ci_low, s.ci_high, s.n, True) for m in WHOLE_COST if (s := metrics.get(m)) and s.n]
    unmeasured = [m for m in WHOLE_COST if m not in {f.metric for f in whole}]
    if not whole:  # nothing measured: the verdict still names what it lacks
        whole, unmeasured = [Figure(m, math.nan, math.nan, math.nan, 0, True) for m in WHOLE_COST], []
    lower = None if switched is None else Figure(LOWER_BOUND, switched.overhead_pct, switched.ci_low_pct,
                                                 switched.ci_high_pct, switched.n_trials, False)
    per_step = next((f for f in whole if f.metric == PairMetric.step_overhead_pct), None)
    verdict = combine(whole + ([lower] if lower is not None else []), budget_pct, assumption_holds(per_step, lower),
                      bound_confidence)
    if unmeasured:
        verdict = replace(verdict, reason=verdict.reason + "".join(f"; {m} unknown (no pair measured it)"
                                                                   for m in unmeasured))
    return verdict
