"""Known-answer tests of ddpbench.analysis.robust (Hodges–Lehmann, Wilcoxon, bootstrap)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from ddpbench.analysis import stats as handwritten
from ddpbench.analysis.robust import (
    bootstrap_interval,
    hodges_lehmann,
    signed_rank_cdf,
    walsh_averages,
    wilcoxon_interval,
)

CASES = [
    [1.2, -0.4, 3.3, 0.8, 2.1],
    [10.3, 9.1, 11.2, 8.9, 10.6, 9.8, 10.1, 10.9],
    [0.5, -0.5],
    [-3.0, 14.0, 2.0, 1.0, 0.0, 5.5, -1.25, 7.0, 2.2, 3.3, 1.1],
]


def test_walsh_averages_and_hodges_lehmann_by_hand() -> None:
    assert walsh_averages([1.0, 2.0, 4.0]).tolist() == [1.0, 1.5, 2.0, 2.5, 3.0, 4.0]
    assert hodges_lehmann([1.0, 2.0, 4.0]) == 2.25
    # robust to one wild pair, unlike the mean
    assert hodges_lehmann([1.0, 1.1, 0.9, 1.0, 50.0]) == pytest.approx(1.05)
    assert math.isnan(hodges_lehmann([]))


def test_signed_rank_cdf_counts() -> None:
    # n = 10: 25 of the 1024 subsets of {1..10} sum to at most 8 (the tabled critical value)
    cdf = signed_rank_cdf(10)
    assert cdf[8] * 1024 == pytest.approx(25)
    assert cdf[-1] == 1.0 and len(cdf) == 56
    assert signed_rank_cdf(3).tolist() == pytest.approx([1 / 8, 2 / 8, 3 / 8, 5 / 8, 6 / 8, 7 / 8, 1.0])


@pytest.mark.parametrize("n", [6, 9, 15])
def test_signed_rank_cdf_matches_scipy_exact_test(n: int) -> None:
    # scipy's exact one-sided p-value of a sample whose positive ranks sum to t is P(T <= t)
    cdf = signed_rank_cdf(n)
    ranks = np.arange(1, n + 1, dtype=float)
    for negative in ([1, 2], [1, n], list(range(1, n // 2 + 1))):
        sample = np.where(np.isin(ranks, negative), -ranks, ranks)
        t = int(ranks[np.isin(ranks, negative)].sum())
        p = st.wilcoxon(sample, alternative="less", method="exact").pvalue
        # T+ = n(n+1)/2 - t; P(T+ <= n(n+1)/2 - t) = P(T <= n(n+1)/2 - t) by symmetry
        assert p == pytest.approx(cdf[len(cdf) - 1 - t], abs=1e-12)


def test_wilcoxon_interval_n10_known_cut() -> None:
    xs = [float(v) for v in range(1, 11)]
    w = walsh_averages(xs)
    r = wilcoxon_interval(xs, 0.95)
    assert (r.ci_low, r.ci_high) == (w[8], w[46])  # ranks 9 and 47 of 55
    assert r.achieved_confidence == pytest.approx(1 - 2 * 25 / 1024)
    assert r.estimate == 5.5 and r.exact


def test_wilcoxon_interval_unreachable_level_gives_min_max() -> None:
    r = wilcoxon_interval([1.0, 3.0, 2.0, 5.0, 4.0], 0.95)  # n = 5: 93.75 % at best
    assert (r.ci_low, r.ci_high) == (1.0, 5.0)
    assert r.achieved_confidence == pytest.approx(1 - 2 / 32)
    r6 = wilcoxon_interval([1.0, 3.0, 2.0, 5.0, 4.0, 0.0], 0.95)  # n = 6: [min, max] is 96.9 %
    assert (r6.ci_low, r6.ci_high) == (0.0, 5.0)
    assert r6.achieved_confidence == pytest.approx(1 - 2 / 64)


def test_wilcoxon_interval_coverage_by_simulation() -> None:
    rng = np.random.default_rng(5)
    hits = 0
    for row in rng.standard_t(3, size=(400, 12)):
        r = wilcoxon_interval(row.tolist(), 0.90)
        hits += r.ci_low <= 0.0 <= r.ci_high
    assert hits / 400 >= 0.90 - 3 * math.sqrt(0.09 / 400)


def test_wilcoxon_normal_approximation_agrees_with_exact_at_n_200(monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpbench.analysis import robust

    xs = np.random.default_rng(3).normal(1.0, 2.0, 200).tolist()
    exact = wilcoxon_interval(xs)
    monkeypatch.setattr(robust, "EXACT_MAX_N", 100)
    approx = wilcoxon_interval(xs)
    assert not approx.exact
    assert approx.achieved_confidence == pytest.approx(exact.achieved_confidence, abs=2e-3)
    assert approx.ci_low == pytest.approx(exact.ci_low, abs=0.02)


@pytest.mark.parametrize("df", [1, 2, 4, 9, 30, 100])
def test_scipy_t_matches_handwritten_t(df: int) -> None:
    for p in (0.8, 0.9, 0.975, 0.995, 0.999):
        assert st.t.ppf(p, df) == pytest.approx(handwritten.t_ppf(p, df), abs=1e-9)
    for t in (-4.0, -0.7, 0.3, 2.0, 6.0):
        assert st.t.cdf(t, df) == pytest.approx(handwritten.t_cdf(t, df), abs=1e-9)


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    xs = CASES[3]
    a = bootstrap_interval(xs, "mean", seed=7, n_resamples=2000)
    b = bootstrap_interval(xs, "mean", seed=7, n_resamples=2000)
    c = bootstrap_interval(xs, "mean", seed=8, n_resamples=2000)
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high)
    assert a.estimate == pytest.approx(np.mean(xs))
    assert a.ci_low < a.estimate < a.ci_high
    assert a.method == "BCa"
    med = bootstrap_interval(xs, "median", seed=7, n_resamples=2000)
    assert med.ci_low <= med.estimate == np.median(xs) <= med.ci_high


def test_bootstrap_percentile_matches_numpy_resampling() -> None:
    xs = np.array(CASES[1])
    r = bootstrap_interval(xs, "mean", 0.90, n_resamples=4000, seed=1, method="percentile")
    # the percentile interval of the bootstrap distribution lies near the normal-theory interval
    se = xs.std(ddof=1) / math.sqrt(len(xs))
    assert r.ci_low == pytest.approx(xs.mean() - 1.645 * se, abs=0.25 * se)
    assert r.ci_high == pytest.approx(xs.mean() + 1.645 * se, abs=0.25 * se)


def test_bootstrap_degenerate_and_bad_input() -> None:
    same = bootstrap_interval([1.5, 1.5, 1.5])
    assert (same.ci_low, same.ci_high) == (1.5, 1.5)
    assert math.isnan(bootstrap_interval([1.0]).ci_low)
    with pytest.raises(ValueError, match="unknown statistic 'mode'"):
        bootstrap_interval([1.0, 2.0], "mode")
    with pytest.raises(ValueError, match="unknown bootstrap method"):
        bootstrap_interval([1.0, 2.0], method="basic")
    with pytest.raises(ValueError, match="differences must be finite numbers, got inf"):
        bootstrap_interval([1.0, float("inf")])
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
        wilcoxon_interval([1.0, 2.0], 95)

