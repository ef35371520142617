"""The stopping rule of ``repeat=auto`` (ddpbench.analysis.sequential): error rates under optional
stopping, simulated on seeded synthetic per-pair overheads, and deterministic decisions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from ddpbench.analysis.sequential import SPENDING_FUNCTIONS, alpha_spent, boundaries, decide, look_level, pairs_needed, replay

ALPHA = 0.05
BUDGET = 2.0
MIN_PAIRS, MAX_PAIRS = 3, 20
REPLICATIONS = 6000


def _tolerance(rate: float, n: int) -> float:
    """Three binomial standard errors of a rate estimated from ``n`` replications."""
    return 3.0 * math.sqrt(rate * (1.0 - rate) / n)


def _verdicts(true_mean: float, sd: float, spending: str, seed: int, halfwidth: float | None = None) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    counts: dict[str, int] = {}
    for row in true_mean + sd * rng.standard_normal((REPLICATIONS, MAX_PAIRS)):
        d = replay(row.tolist(), BUDGET, 1 - ALPHA, halfwidth, MIN_PAIRS, MAX_PAIRS, spending)
        assert d.stop
        counts[d.reason] = counts.get(d.reason, 0) + 1
    return counts


@pytest.mark.slow  # thousands of simulated sweeps
@pytest.mark.parametrize("spending", SPENDING_FUNCTIONS)
def test_false_verdict_rate_at_the_budget_stays_below_alpha(spending: str) -> None:
    # true overhead exactly at the budget: every decisive verdict ("over" or "within") is false
    counts = _verdicts(BUDGET, 3.0, spending, seed=16)
    false_rate = (counts.get("over", 0) + counts.get("within", 0)) / REPLICATIONS
    assert false_rate <= ALPHA + _tolerance(ALPHA, REPLICATIONS)
    assert counts.get("over", 0) / REPLICATIONS <= ALPHA / 2 + _tolerance(ALPHA / 2, REPLICATIONS)


@pytest.mark.slow  # thousands of simulated sweeps
def test_false_over_rate_of_an_aa_comparison_with_a_precision_target() -> None:
    # A/A (true overhead 0) against a budget of 2 with noise large enough to reach it: a false
    # "over" needs the interval to miss by more than the budget, stopping for precision or not
    counts = _verdicts(0.0, 12.0, "pocock", seed=17, halfwidth=4.0)
    assert counts.get("over", 0) / REPLICATIONS <= ALPHA / 2 + _tolerance(ALPHA / 2, REPLICATIONS)
    assert counts.get("within", 0) + counts.get("precise", 0) > 0


def test_naive_repeated_95_percent_intervals_break_alpha() -> None:
    # the check above can fail: stopping on the first decisive fixed 95 % t interval does
    rng = np.random.default_rng(18)
    data = BUDGET + 3.0 * rng.standard_normal((REPLICATIONS, MAX_PAIRS))
    false = np.zeros(REPLICATIONS, dtype=bool)
    for n in range(MIN_PAIRS, MAX_PAIRS + 1):
        x = data[:, :n]
        half = st.t.isf(ALPHA / 2, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
        m = x.mean(axis=1)
        false |= (m - half > BUDGET) | (m + half < BUDGET)
    assert false.mean() > ALPHA + _tolerance(ALPHA, REPLICATIONS)


@pytest.mark.parametrize("spending", SPENDING_FUNCTIONS)
def test_spending_sums_to_alpha(spending: str) -> None:
    levels = [look_level(n, ALPHA, MIN_PAIRS, MAX_PAIRS, spending) for n in range(MIN_PAIRS, MAX_PAIRS + 1)]
    assert all(a > 0 for a in levels)
    assert math.fsum(levels) == pytest.approx(ALPHA, abs=1e-12)
    assert alpha_spent(1.0, ALPHA, spending) == pytest.approx(ALPHA, abs=1e-12)


def test_pocock_spending_closed_form() -> None:
    assert alpha_spent(0.5, 0.05, "pocock") == pytest.approx(0.05 * math.log(1 + (math.e - 1) / 2), abs=1e-15)
    assert alpha_spent(0.25, 0.05, "obrien_fleming") == pytest.approx(2 * st.norm.sf(1.959963985 / 0.5), rel=1e-7)


def test_clear_overhead_stops_over_early() -> None:
    # +10 % per step against a 2 % budget, per-pair noise 1.5 points
    overheads = [10.3, 9.1, 11.2, 8.9, 10.6, 9.8, 10.1, 10.9]
    d = replay(overheads, BUDGET)
    assert (d.stop, d.reason) == (True, "over")
    assert d.n <= 5
    assert d.ci_low > BUDGET
    assert "over" in d.message and "\n" not in d.message


def test_small_overhead_stops_within() -> None:
    d = replay([0.1, -0.2, 0.05, 0.15, -0.1, 0.0], BUDGET)
    assert d.reason == "within" and d.ci_high < BUDGET


def test_min_pairs_is_respected() -> None:
    xs = [10.0, 10.1, 9.9, 10.05, 9.95]
    for n in range(0, 5):
        d = decide(xs[:n], BUDGET, min_pairs=5, max_pairs=10, elapsed_minutes=99.0, max_minutes=1.0)
        assert not d.stop and d.reason is None and math.isnan(d.ci_low)
    assert decide(xs, BUDGET, min_pairs=5, max_pairs=10).reason == "over"


def test_max_pairs_stops_with_its_reason() -> None:
    straddling = [2.0 + (3.0 if i % 2 else -3.0) for i in range(6)]
    assert not decide(straddling[:5], BUDGET, min_pairs=3, max_pairs=6).stop
    d = decide(straddling, BUDGET, min_pairs=3, max_pairs=6)
    assert (d.stop, d.reason, d.n) == (True, "max_pairs", 6)
    assert d.ci_low < BUDGET < d.ci_high
    assert replay(straddling, BUDGET, min_pairs=3, max_pairs=6).reason == "max_pairs"


def test_max_minutes_stops_with_its_reason() -> None:
    straddling = [-1.0, 5.0, -1.0, 5.0]
    assert not decide(straddling, BUDGET, elapsed_minutes=9.9, max_minutes=10.0).stop
    d = decide(straddling, BUDGET, elapsed_minutes=10.0, max_minutes=10.0)
    assert (d.stop, d.reason) == (True, "max_minutes")


def test_precision_target_stops_precise() -> None:
    xs = [2.0, 2.1, 1.9, 2.05, 1.95, 2.0]
    assert decide(xs, BUDGET, halfwidth=1.0).reason == "precise"
    assert not decide(xs, BUDGET).stop


def test_interval_widens_with_the_number_of_looks() -> None:
    xs = [1.0, 3.0, 2.5, 1.5, 2.2]
    short = decide(xs, 0.0, min_pairs=5, max_pairs=5)
    long = decide(xs, 0.0, min_pairs=5, max_pairs=50)
    fixed = st.t.isf(0.025, 4) * np.std(xs, ddof=1) / math.sqrt(5)
    assert short.half_width == pytest.approx(fixed, rel=1e-12)  # one look: the fixed-n t interval
    assert long.half_width > short.half_width


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"min_pairs": 8, "max_pairs": 5}, "min_pairs (8) is above max_pairs (5)"),
        ({"halfwidth": 0.0}, "precision half-width must be positive, got 0.0"),
        ({"halfwidth": -1.0}, "precision half-width must be positive, got -1.0"),
        ({"min_pairs": 1}, "min_pairs must be at least 2"),
        ({"confidence": 1.0}, "confidence must be in (0, 1), got 1.0"),
        ({"max_minutes": 0.0}, "max_minutes must be positive, got 0.0"),
        ({"spending": "haybittle"}, "unknown spending function 'haybittle'"),
    ],
)
def test_bad_settings_raise_one_line(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        decide([1.0, 2.0, 3.0], BUDGET, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_non_finite_overhead_raises() -> None:
    with pytest.raises(ValueError, match="overheads must be finite numbers, got nan"):
        decide([1.0, float("nan"), 3.0], BUDGET)
    with pytest.raises(ValueError, match="budget must be a finite number"):
        decide([1.0, 2.0, 3.0], float("inf"))


@pytest.mark.parametrize("spending", SPENDING_FUNCTIONS)
def test_exact_boundaries_spend_the_whole_alpha(spending: str) -> None:
    # fresh null paths (another seed than the boundaries'): the chance that any look's interval
    # misses the true mean is alpha itself, not the Boole bound's 1-3 %
    bounds = np.array(boundaries(ALPHA, MIN_PAIRS, MAX_PAIRS, spending))
    reps = 40_000
    x = np.random.default_rng(99).standard_normal((reps, MAX_PAIRS)) * 7.0 + 3.0
    n = np.arange(MIN_PAIRS, MAX_PAIRS + 1)
    means = np.stack([x[:, :k].mean(axis=1) for k in n], axis=1)
    sds = np.stack([x[:, :k].std(axis=1, ddof=1) for k in n], axis=1)
    missed = (np.abs(means - 3.0) > bounds * sds / np.sqrt(n)).any(axis=1).mean()
    assert abs(missed - ALPHA) <= _tolerance(ALPHA, reps) + 0.002


def test_exact_boundaries_are_narrower_than_boole_after_the_first_look() -> None:
    bounds = boundaries(ALPHA, MIN_PAIRS, MAX_PAIRS, "pocock")
    boole = [st.t.isf(look_level(k, ALPHA, MIN_PAIRS, MAX_PAIRS) / 2, k - 1) for k in range(MIN_PAIRS, MAX_PAIRS + 1)]
    assert bounds[0] == pytest.approx(boole[0], rel=1e-12)  # one look so far: the plain t quantile
    assert all(b < c for b, c in zip(bounds[1:], boole[1:]))
    assert boundaries(ALPHA, MIN_PAIRS, MAX_PAIRS, "pocock") is bounds  # cached: every look reuses them


def test_pairs_needed_is_the_first_n_whose_fixed_interval_clears_the_budget() -> None:
    # the real 1,000-step sweep of docs/accuracy.md: mean +6.54 %, per-pair SD 7.13 points, budget 2 %
    n = pairs_needed(6.54, 7.13, 2.0)
    assert n is not None and n >= 12  # the sweep ran 12 and, with its looks, did not decide

    def clears(k: int) -> bool:
        return bool(st.t.isf(0.025, k - 1) * 7.13 / math.sqrt(k) < 6.54 - 2.0)

    assert clears(n) and not clears(n - 1)
    assert pairs_needed(2.0, 3.0, 2.0) is None  # at the budget: no number of pairs decides
    assert pairs_needed(2.01, 30.0, 2.0) is None  # beyond the limit
    assert pairs_needed(5.0, 0.0, 2.0) == 2


def test_an_inconclusive_stop_says_how_many_pairs_a_verdict_needs() -> None:
    xs = [6.0, -1.0, 14.0, 3.0, 10.0]
    d = decide(xs, 2.0, min_pairs=3, max_pairs=5)
    assert d.reason == "max_pairs" and d.pairs_needed == pairs_needed(d.mean, float(np.std(xs, ddof=1)), 2.0)
    assert d.pairs_needed is not None and d.pairs_needed_auto is not None
    assert f"a verdict needs about {d.pairs_needed_auto} pairs with these looks (at least {d.pairs_needed}" in d.message
    # the looks cost width: the estimate exceeds the fixed-n bound by the squared ratio of the last boundary to t
    ratio = (boundaries(ALPHA, 3, 5, "pocock")[-1] / st.t.isf(ALPHA / 2, 4)) ** 2
    assert d.pairs_needed_auto == math.ceil(d.pairs_needed * ratio) > d.pairs_needed
    decided = decide([20.0, 21.0, 19.0, 20.5], 2.0, min_pairs=3, max_pairs=5)
    assert decided.reason == "over" and decided.pairs_needed is None and decided.pairs_needed_auto is None
    assert "needs about" not in decided.message


def test_the_within_trial_lower_bound_stops_as_over_but_never_as_within() -> None:
    from ddpbench.analysis.sequential import decide_with_lower_bound

    whole = [1.0, 6.0, -2.0, 5.0]  # straddles the 2 % budget
    assert not decide_with_lower_bound(whole, [], 2.0, min_pairs=3, max_pairs=12).stop
    over = decide_with_lower_bound(whole, [3.1, 3.0, 2.9, 3.0], 2.0, min_pairs=3, max_pairs=12)
    assert over.reason == "over" and over.message.startswith("within-trial lower bound")
    low = decide_with_lower_bound(whole, [0.1, 0.0, -0.1, 0.0], 2.0, min_pairs=3, max_pairs=12)
    assert not low.stop  # wholly below the budget, but a lower bound cannot prove "within"
    within = decide_with_lower_bound([0.5, 0.4, 0.6, 0.5], [0.1, 0.0, -0.1, 0.0], 2.0, min_pairs=3, max_pairs=12)
    assert within.reason == "within" and not within.message.startswith("within-trial")
