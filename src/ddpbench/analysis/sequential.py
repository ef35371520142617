"""When to stop adding pairs (``repeat=auto``): a group-sequential rule with alpha spending. Pure.

The error α = 1 − confidence is spent over the looks at n = ``min_pairs`` … ``max_pairs`` pairs by a Lan–DeMets
spending function; look n's interval is mean ± c_n · s/√n, with c_n simulated so that all looks together miss
the true mean with probability α (repeated confidence intervals). Method, references and simulated error rates:
docs/sequential.md. Units: the metric's (% or ms)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Sequence

import numpy as np

from ddpbench.analysis.stats import mean_sd, normal_isf, normal_sf, t_isf, t_sf
from ddpbench.choices import Choice, Spending, Verdict



class StopReason(Choice):
    """Why a sequence of looks stops, in the order :func:`decide` checks them: a verdict, or a limit without one."""

    over = "over"  # the interval lies wholly above the budget
    within = "within"  # wholly below it
    precise = "precise"  # its half-width reached the target
    max_pairs = "max_pairs"
    max_minutes = "max_minutes"

    @property
    def verdict(self) -> Verdict:
        """The verdict this stop gives: ``over``, ``within``, else ``inconclusive``."""
        return _VERDICT_OF.get(self, Verdict.inconclusive)


_VERDICT_OF = {StopReason.over: Verdict.over, StopReason.within: Verdict.within}
SPENDING_FUNCTIONS = tuple(Spending)
#: simulated null paths behind the boundaries of :func:`boundaries`
SIMULATIONS = 200_000
#: seed of those paths: every driver of a sweep (and every later report) gets the same boundaries
BOUNDARY_SEED = 16


@dataclass(frozen=True)
class StopDecision:
    """What :func:`decide` concluded after ``n`` pairs: ``reason`` None while more are needed; the look's interval
    (metric unit, NaN before ``min_pairs``) at ``look_confidence``, ``confidence`` over all looks; one line for the
    report."""

    stop: bool
    reason: StopReason | None
    n: int
    mean: float
    ci_low: float
    ci_high: float
    confidence: float
    look_confidence: float
    budget: float
    message: str
    #: an inconclusive stop's hint: the fewest pairs a fixed-n interval would need (:func:`pairs_needed`), and with
    #: this rule's looks (:func:`pairs_needed_with_looks`); None when decided, or when no number would
    pairs_needed: int | None = None
    pairs_needed_auto: int | None = None

    @property
    def verdict(self) -> Verdict:
        """The verdict of the stop (``inconclusive`` while more pairs are needed)."""
        return self.reason.verdict if self.reason is not None else Verdict.inconclusive

    @property
    def half_width(self) -> float:
        """Half the interval's width (metric unit); NaN when there is no interval."""
        return (self.ci_high - self.ci_low) / 2.0


def check_rule(confidence: float, halfwidth: float | None, min_pairs: int, max_pairs: int, max_minutes: float,
               spending: str) -> None:
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


def alpha_spent(t: float, alpha: float, spending: str = Spending.pocock) -> float:
    """Cumulative error α(t) spent by information fraction ``t`` in [0, 1] (Lan and DeMets 1983)."""
    if t <= 0.0:
        return 0.0
    t = min(t, 1.0)
    if spending == Spending.pocock:
        return alpha * math.log1p((math.e - 1.0) * t)
    if spending == Spending.obrien_fleming:
        return 2.0 * normal_sf(normal_isf(alpha / 2.0) / math.sqrt(t))
    raise ValueError(f"unknown spending function {spending!r}; choose one of {', '.join(SPENDING_FUNCTIONS)}")


def look_level(n: int, alpha: float, min_pairs: int, max_pairs: int, spending: str = Spending.pocock) -> float:
    """The error α_n given to the look at ``n`` pairs (``min_pairs`` ≤ n ≤ ``max_pairs``)."""
    if not min_pairs <= n <= max_pairs:
        raise ValueError(f"no look at n={n}: looks are at {min_pairs}..{max_pairs} pairs")
    prev = 0.0 if n == min_pairs else alpha_spent((n - 1) / max_pairs, alpha, spending)
    return alpha_spent(n / max_pairs, alpha, spending) - prev


@lru_cache(maxsize=64)
def boundaries(alpha: float, min_pairs: int, max_pairs: int, spending: str = Spending.pocock) -> tuple[float, ...]:
    """Critical values ``c_n`` (units of s/√n) of the looks at n = ``min_pairs`` … ``max_pairs``: look n is the
    first to miss the true mean with probability :func:`look_level` (normal pair values, seeded simulation)."""
    check_rule(1.0 - alpha, None, min_pairs, max_pairs, math.inf, spending)
    rng = np.random.default_rng(BOUNDARY_SEED)
    total = np.zeros(SIMULATIONS)
    squares = np.zeros(SIMULATIONS)
    alive = np.ones(SIMULATIONS, dtype=bool)
    crits: list[float] = []
    for n in range(1, max_pairs + 1):
        x = rng.standard_normal(SIMULATIONS)
        total += x
        squares += x * x
        if n < min_pairs:
            continue
        mean = total / n
        sd = np.sqrt(np.maximum(squares - n * mean * mean, 0.0) / (n - 1))
        stat = np.abs(mean) / (sd / math.sqrt(n))
        level = look_level(n, alpha, min_pairs, max_pairs, spending)
        crossing = int(round(level * SIMULATIONS))
        live = np.sort(stat[alive])
        if n == min_pairs:  # nothing crossed before: the exact t quantile, no simulation error
            c = t_isf(level / 2.0, n - 1)
        elif crossing <= 0 or live.size == 0:
            c = math.inf
        elif crossing >= live.size:
            c = 0.0
        else:
            c = float(live[live.size - crossing - 1])
        crits.append(c)
        alive &= stat <= c
    return tuple(crits)


#: :func:`pairs_needed` looks no further than this many pairs
PAIRS_NEEDED_LIMIT = 1000


def pairs_needed(mean: float, sd: float, budget: float, confidence: float = 0.95) -> int | None:
    """The fewest pairs whose fixed-n paired t interval at this ``mean`` and ``sd`` lies on one side of ``budget``
    (a lower bound for ``repeat=auto``'s looks); None when no number up to :data:`PAIRS_NEEDED_LIMIT` would."""
    gap = abs(mean - budget)
    if not (math.isfinite(gap) and math.isfinite(sd)) or gap == 0.0:
        return None
    if sd == 0.0:
        return 2
    alpha = 1.0 - confidence
    start = max(2, int((normal_isf(alpha / 2.0) * sd / gap) ** 2))  # the normal bound: t needs at least this many
    for n in range(start, PAIRS_NEEDED_LIMIT + 1):
        if t_isf(alpha / 2.0, n - 1) * sd / math.sqrt(n) < gap:
            return n
    return None


def pairs_needed_with_looks(fixed_n: int, alpha: float, min_pairs: int, max_pairs: int, spending: str) -> int:
    """About how many pairs ``repeat=auto`` needs where a fixed-n interval needs ``fixed_n``: ``(c / t)²`` times as
    many, c the last boundary and t the fixed-n quantile (an estimate for planning, not a guarantee)."""
    last = boundaries(alpha, min_pairs, max_pairs, spending)[-1]
    inflation = (last / t_isf(alpha / 2.0, max_pairs - 1)) ** 2 if max_pairs > 1 else 1.0
    return max(fixed_n, math.ceil(fixed_n * inflation))


def decide(overheads: Sequence[float], budget: float, confidence: float = 0.95, halfwidth: float | None = None,
           min_pairs: int = 3, max_pairs: int = 20, elapsed_minutes: float = 0.0, max_minutes: float = math.inf,
           spending: str = Spending.pocock) -> StopDecision:
    """Whether the sweep stops after the per-pair ``overheads`` so far (in finishing order), and why.

    ``budget`` and ``halfwidth`` are in the overheads' unit. Reasons are checked in :class:`StopReason` order from
    ``min_pairs`` on; pairs beyond ``max_pairs`` are ignored. ValueError for unusable settings or a non-finite
    overhead.
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
    crit = boundaries(alpha, min_pairs, max_pairs, spending)[look - min_pairs]
    a_n = 2.0 * t_sf(crit, look - 1)  # the per-look error of a fixed-n t interval that wide
    if n > max_pairs:
        xs = xs[:max_pairs]
    m, sd = mean_sd(xs)
    half = crit * sd / math.sqrt(look)
    lo, hi = m - half, m + half
    reason: StopReason | None
    if lo > budget:
        reason, why = StopReason.over, "stop: wholly above the budget (over)"
    elif hi < budget:
        reason, why = StopReason.within, "stop: wholly below the budget (within)"
    elif halfwidth is not None and half <= halfwidth:
        reason, why = StopReason.precise, f"stop: half-width {half:.4g} reached the target {halfwidth:g} (inconclusive)"
    elif n >= max_pairs:
        reason, why = StopReason.max_pairs, f"stop: max_pairs={max_pairs} reached (inconclusive)"
    elif elapsed_minutes >= max_minutes:
        reason, why = StopReason.max_minutes, f"stop: {elapsed_minutes:.1f} of max_minutes={max_minutes:g} used (inconclusive)"
    else:
        reason, why = None, "continue"
    interval = (f"{look} pairs: mean {m:+.4g}, interval [{lo:+.4g}, {hi:+.4g}] at {100 * (1 - a_n):.3g} % per look "
                f"({100 * confidence:g} % overall, {spending} spending) vs budget {budget:g}")
    inconclusive = reason is not None and reason.verdict == Verdict.inconclusive
    needed = pairs_needed(m, sd, budget, confidence) if inconclusive else None
    needed_auto = pairs_needed_with_looks(needed, alpha, min_pairs, max_pairs, spending) if needed is not None else None
    if inconclusive:
        if needed is None:
            why += f"; at this mean and spread no verdict within {PAIRS_NEEDED_LIMIT} pairs (the mean is too close to the budget)"
        elif needed_auto == needed:
            why += f"; at this mean and spread a verdict needs at least {needed} pairs"
        else:
            why += (f"; at this mean and spread a verdict needs about {needed_auto} pairs with these looks (at least "
                    f"{needed} for a fixed-n {100 * confidence:g} % interval)")
    return StopDecision(reason is not None, reason, look, m, lo, hi, confidence, 1.0 - a_n, budget,
                        f"{interval}: {why}", needed, needed_auto)


def decide_with_lower_bound(overheads: Sequence[float], lower_bounds: Sequence[float], budget: float,
                            confidence: float = 0.95, halfwidth: float | None = None, min_pairs: int = 3,
                            max_pairs: int = 20, elapsed_minutes: float = 0.0, max_minutes: float = math.inf,
                            spending: str = Spending.pocock) -> StopDecision:
    """:func:`decide` on the whole-cost ``overheads``, or ``over`` from the within-trial ``lower_bounds`` (one value
    per pair, the same unit) when that sequence's interval lies wholly above the budget first.

    The lower bound's intervals are at 1 − α/2, so a false ``over`` has probability at most 3α/4; only the whole
    cost can stop as ``within``. Without ``min_pairs`` lower bounds the decision is :func:`decide`'s alone.
    """
    whole = decide(overheads, budget, confidence, halfwidth, min_pairs, max_pairs, elapsed_minutes, max_minutes,
                   spending)
    if whole.reason == StopReason.over or len(lower_bounds) < min_pairs:
        return whole
    bound = decide(lower_bounds, budget, 1.0 - (1.0 - confidence) / 2.0, None, min_pairs, max_pairs, spending=spending)
    if bound.reason != StopReason.over:
        return whole
    return replace(bound, message=f"within-trial lower bound, {bound.message}")


def replay(overheads: Sequence[float], budget: float, confidence: float = 0.95, halfwidth: float | None = None,
           min_pairs: int = 3, max_pairs: int = 20, spending: str = Spending.pocock) -> StopDecision:
    """:func:`decide` after each pair of ``overheads`` in turn (no time limit): the first stop, else the last look."""
    check_rule(confidence, halfwidth, min_pairs, max_pairs, math.inf, spending)
    last = decide([], budget, confidence, halfwidth, min_pairs, max_pairs, spending=spending)
    for n in range(min(min_pairs, len(overheads)), min(len(overheads), max_pairs) + 1):
        last = decide(overheads[:n], budget, confidence, halfwidth, min_pairs, max_pairs, spending=spending)
        if last.stop:
            break
    return last
