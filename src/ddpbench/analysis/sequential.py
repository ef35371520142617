"""When to stop adding pairs (``repeat=auto``): a group-sequential rule with alpha spending.

After every new pair the sweeper asks :func:`decide` whether the chosen metric's interval is
decisive against the budget. Looking after every pair and stopping on the first decisive interval
would inflate the error rate of a fixed 95 % interval (the more looks, the more chances for one
interval to miss the true mean). The rule here keeps its stated confidence under this optional
stopping:

**Rule: Bonferroni-bounded alpha spending over the looks.** The total error ``α = 1 − confidence``
is spread over the looks at n = ``min_pairs``, ``min_pairs`` + 1, …, ``max_pairs`` pairs by an
alpha-spending function ``α(t)`` of the information fraction ``t = n / max_pairs`` (Lan, K. K. G.
and DeMets, D. L., 1983, "Discrete sequential boundaries for clinical trials", *Biometrika* 70(3),
659–663). The look at n pairs gets ``α_n = α(n / N) − α((n − 1) / N)`` (the first look, at
``min_pairs``, gets all of ``α(min_pairs / N)``), and its interval is Student's paired *t* interval
at level ``1 − α_n``::

    mean ± t(1 − α_n / 2, n − 1) · s / √n

The ``α_n`` sum to ``α(1) = α``, so by Boole's inequality the probability that *any* look's interval
misses the true mean is at most α, whatever the dependence between the looks and whenever the
sweep stops (decisive, precise enough, out of pairs or out of time). Hence the probability of a
false "over" (true mean ≤ budget) or a false "within" (true mean ≥ budget) is at most α (each at
most α/2). Looks the caller skips (deciding only between batches) only leave their share unspent;
the rule stays valid. Each look's interval assumes the per-pair values are independent and
roughly normal, as the fixed-n paired *t* interval does.

Spending functions (both proposed by Lan and DeMets 1983):

- ``pocock`` (default): ``α(t) = α · ln(1 + (e − 1) · t)`` — spends early, so a clear effect is
  decided in few pairs;
- ``obrien_fleming``: ``α(t) = 2 − 2 Φ(z(1 − α/2) / √t)`` — spends almost nothing early (an
  O'Brien–Fleming-shaped boundary), so the last looks are nearly as narrow as a fixed-n interval.

Everything here is pure: plain floats in, a :class:`StopDecision` out. Units of the overheads, the
budget, the half-width and the interval are the metric's (percent or milliseconds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from scipy import stats as _st

__all__ = [
    "SPENDING_FUNCTIONS",
    "STOP_REASONS",
    "StopDecision",
    "alpha_spent",
    "check_rule",
    "decide",
    "look_level",
    "replay",
]

#: the reasons a sweep stops, in the order they are checked
STOP_REASONS = ("over", "within", "precise", "max_pairs", "max_minutes")
SPENDING_FUNCTIONS = ("pocock", "obrien_fleming")
RULE_NAME = "alpha spending (Lan-DeMets 1983) over per-pair looks, Bonferroni-bounded paired t intervals"


@dataclass(frozen=True)
class StopDecision:
    """What :func:`decide` concluded after ``n`` pairs.

    ``stop`` is False while more pairs are needed; then ``reason`` is None. ``ci_low``/``ci_high``
    is the interval of this look (metric unit) at the per-look level ``look_confidence``; the
    sequence of such intervals has overall confidence ``confidence``. NaN bounds before
    ``min_pairs``. ``message`` is one line for the report.
    """

    stop: bool
    reason: str | None
    n: int
    mean: float
    ci_low: float
    ci_high: float
    confidence: float
    look_confidence: float
    budget: float
    message: str

    @property
    def half_width(self) -> float:
        """Half the interval's width (metric unit); NaN when there is no interval."""
        return (self.ci_high - self.ci_low) / 2.0


def check_rule(
    confidence: float, halfwidth: float | None, min_pairs: int, max_pairs: int, max_minutes: float, spending: str
) -> None:
    """Raise ValueError (one line) when the rule's settings are unusable."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if halfwidth is not None and not halfwidth > 0.0:
        raise ValueError(f"precision half-width must be positive, got {halfwidth}")
    if min_pairs < 2:
        raise ValueError(f"min_pairs must be at least 2 (a t interval needs 2 pairs), got {min_pairs}")
    if min_pairs > max_pairs:
        raise ValueError(f"min_pairs ({min_pairs}) is above max_pairs ({max_pairs})")
    if not max_minutes > 0.0:
        raise ValueError(f"max_minutes must be positive, got {max_minutes}")
    if spending not in SPENDING_FUNCTIONS:
        raise ValueError(f"unknown spending function {spending!r}; choose one of {', '.join(SPENDING_FUNCTIONS)}")


def alpha_spent(t: float, alpha: float, spending: str = "pocock") -> float:
    """Cumulative error α(t) spent by information fraction ``t`` in [0, 1] (Lan and DeMets 1983)."""
    if t <= 0.0:
        return 0.0
    t = min(t, 1.0)
    if spending == "pocock":
        return alpha * math.log1p((math.e - 1.0) * t)
    if spending == "obrien_fleming":
        return float(2.0 * _st.norm.sf(_st.norm.isf(alpha / 2.0) / math.sqrt(t)))
    raise ValueError(f"unknown spending function {spending!r}; choose one of {', '.join(SPENDING_FUNCTIONS)}")


def look_level(n: int, alpha: float, min_pairs: int, max_pairs: int, spending: str = "pocock") -> float:
    """The error α_n given to the look at ``n`` pairs (``min_pairs`` ≤ n ≤ ``max_pairs``)."""
    if not min_pairs <= n <= max_pairs:
        raise ValueError(f"no look at n={n}: looks are at {min_pairs}..{max_pairs} pairs")
    prev = 0.0 if n == min_pairs else alpha_spent((n - 1) / max_pairs, alpha, spending)
    return alpha_spent(n / max_pairs, alpha, spending) - prev


@lru_cache(maxsize=4096)
def _critical_t(n: int, alpha: float, min_pairs: int, max_pairs: int, spending: str) -> tuple[float, float]:
    a_n = look_level(n, alpha, min_pairs, max_pairs, spending)
    return float(_st.t.isf(a_n / 2.0, n - 1)), a_n


def _mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    n = len(xs)
    m = math.fsum(xs) / n
    sd = math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (n - 1)) if n > 1 else math.nan
    if sd <= 1e-12 * max(1.0, abs(m)):
        sd = 0.0
    return m, sd


def decide(
    overheads: Sequence[float],
    budget: float,
    confidence: float = 0.95,
    halfwidth: float | None = None,
    min_pairs: int = 3,
    max_pairs: int = 20,
    elapsed_minutes: float = 0.0,
    max_minutes: float = math.inf,
    spending: str = "pocock",
) -> StopDecision:
    """Decide, after the pairs so far, whether the sweep stops and why.

    ``overheads`` are the per-pair values of the metric (its unit: % or ms), in the order the
    pairs finished; ``budget`` and ``halfwidth`` are in the same unit. Checked in this order, from
    ``min_pairs`` on: ``over`` (interval wholly above the budget), ``within`` (wholly below),
    ``precise`` (half-width ≤ ``halfwidth``; None: no precision target), ``max_pairs``
    (n ≥ ``max_pairs``), ``max_minutes`` (``elapsed_minutes`` ≥ ``max_minutes``). Before
    ``min_pairs`` the sweep always continues, whatever the time. Pairs beyond ``max_pairs`` (a
    batch that overshot) are ignored: the last look is at the first ``max_pairs``. Raises
    ValueError for unusable settings or a non-finite overhead.
    """
    check_rule(confidence, halfwidth, min_pairs, max_pairs, max_minutes, spending)
    xs = [float(v) for v in overheads]
    bad = [v for v in xs if not math.isfinite(v)]
    if bad:
        raise ValueError(f"overheads must be finite numbers, got {bad[0]}")
    if not math.isfinite(budget):
        raise ValueError(f"budget must be a finite number, got {budget}")
    n = len(xs)
    alpha = 1.0 - confidence
    if n < min_pairs:
        m = math.fsum(xs) / n if n else math.nan
        return StopDecision(False, None, n, m, math.nan, math.nan, confidence, math.nan, budget,
                            f"{n} of at least {min_pairs} pairs: continue")
    look = min(n, max_pairs)
    crit, a_n = _critical_t(look, alpha, min_pairs, max_pairs, spending)
    if n > max_pairs:
        xs = xs[:max_pairs]
    m, sd = _mean_sd(xs)
    half = crit * sd / math.sqrt(look)
    lo, hi = m - half, m + half
    if lo > budget:
        reason: str | None = "over"
    elif hi < budget:
        reason = "within"
    elif halfwidth is not None and half <= halfwidth:
        reason = "precise"
    elif n >= max_pairs:
        reason = "max_pairs"
    elif elapsed_minutes >= max_minutes:
        reason = "max_minutes"
    else:
        reason = None
    interval = (f"{look} pairs: mean {m:+.4g}, interval [{lo:+.4g}, {hi:+.4g}] at {100 * (1 - a_n):.3g} % per look "
                f"({100 * confidence:g} % overall, {spending} spending) vs budget {budget:g}")
    if reason == "over":
        why = "stop: wholly above the budget (over)"
    elif reason == "within":
        why = "stop: wholly below the budget (within)"
    elif reason == "precise":
        why = f"stop: half-width {half:.4g} reached the target {halfwidth:g} (inconclusive)"
    elif reason == "max_pairs":
        why = f"stop: max_pairs={max_pairs} reached (inconclusive)"
    elif reason == "max_minutes":
        why = f"stop: {elapsed_minutes:.1f} of max_minutes={max_minutes:g} used (inconclusive)"
    else:
        why = "continue"
    return StopDecision(reason is not None, reason, look, m, lo, hi, confidence, 1.0 - a_n, budget,
                        f"{interval}: {why}")


def replay(
    overheads: Sequence[float],
    budget: float,
    confidence: float = 0.95,
    halfwidth: float | None = None,
    min_pairs: int = 3,
    max_pairs: int = 20,
    spending: str = "pocock",
) -> StopDecision:
    """Apply :func:`decide` after each pair of ``overheads`` in turn; the first stop, else the last look.

    For simulations and for re-deciding a finished sweep; no time limit applies.
    """
    check_rule(confidence, halfwidth, min_pairs, max_pairs, math.inf, spending)
    last = decide([], budget, confidence, halfwidth, min_pairs, max_pairs, spending=spending)
    for n in range(min(min_pairs, len(overheads)), min(len(overheads), max_pairs) + 1):
        last = decide(overheads[:n], budget, confidence, halfwidth, min_pairs, max_pairs, spending=spending)
        if last.stop:
            break
    return last
