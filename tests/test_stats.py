"""Known-answer tests of ddpbench.analysis.stats (t distribution, paired t interval, MDE, CV)."""

from __future__ import annotations

import math

import pytest

from ddpbench.analysis.stats import (
    coefficient_of_variation,
    f_sf,
    median,
    min_detectable_effect,
    normal_cdf,
    normal_isf,
    normal_sf,
    paired_summary,
    sample_std,
    t_cdf,
    t_isf,
    t_ppf,
    t_sf,
)

# Two-sided 95 % critical values, t(0.975, df), from standard tables.
T975 = {1: 12.7062047, 2: 4.3026527, 4: 2.7764451, 9: 2.2621572, 10: 2.2281389, 30: 2.0422725, 100: 1.9839715}


def test_distribution_functions_equal_scipy_stats() -> None:
    """The special functions give what scipy.stats gives, over each function's range."""
    from scipy import stats

    for df in (1, 2.5, 4, 30, 1e6):
        for x in (-40.0, -2.0, -0.3, 0.0, 0.7, 3.1, 50.0):
            assert t_cdf(x, df) == stats.t.cdf(x, df) and t_sf(x, df) == stats.t.sf(x, df)
        for p in (1e-9, 0.025, 0.5, 0.8, 0.999):
            assert t_ppf(p, df) == stats.t.ppf(p, df) and t_isf(p, df) == stats.t.isf(p, df)
        # the ends, where scipy.stats answers from the support (an O'Brien-Fleming look can spend nothing)
        assert t_isf(0.0, df) == stats.t.isf(0.0, df) == math.inf and t_isf(1.0, df) == stats.t.isf(1.0, df) == -math.inf
        assert math.isnan(t_isf(1.5, df)) and math.isnan(stats.t.isf(1.5, df))
        assert t_sf(math.inf, df) == stats.t.sf(math.inf, df) == 0.0
        assert f_sf(2.3, 3, df) == stats.f.sf(2.3, 3, df) and f_sf(0.0, 2, df) == 1.0
    for z in (-9.0, -1.96, 0.0, 0.4, 6.0):
        assert normal_cdf(z) == stats.norm.cdf(z) and normal_sf(z) == stats.norm.sf(z)
    for p in (0.0, 1e-12, 0.025, 0.5, 0.975, 1.0):
        assert normal_isf(p) == stats.norm.isf(p)


@pytest.mark.parametrize("df,expected", sorted(T975.items()))
def test_t_ppf_matches_table(df: int, expected: float) -> None:
    assert t_ppf(0.975, df) == pytest.approx(expected, abs=1e-6)


def test_t_ppf_other_quantiles() -> None:
    assert t_ppf(0.8, 4) == pytest.approx(0.9409646, abs=1e-6)
    assert t_ppf(0.995, 9) == pytest.approx(3.2498355, abs=1e-6)
    assert t_ppf(0.025, 4) == pytest.approx(-2.7764451, abs=1e-6)
    assert t_ppf(0.5, 7) == 0.0


@pytest.mark.parametrize("t", [-5.0, -1.0, -0.3, 0.0, 0.7, 2.0, 10.0])
def test_t_cdf_closed_forms(t: float) -> None:
    assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
    assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)


def test_t_cdf_inverts_ppf() -> None:
    for df in (1, 3, 8, 50):
        for p in (0.01, 0.2, 0.9, 0.999):
            assert t_cdf(t_ppf(p, df), df) == pytest.approx(p, abs=1e-10)


def test_paired_summary_hand_computed() -> None:
    s = paired_summary([1.0, 2.0, 3.0, 4.0, 5.0])
    se = math.sqrt(2.5) / math.sqrt(5)
    assert (s.n, s.mean, s.median, s.min, s.max) == (5, 3.0, 3.0, 1.0, 5.0)
    assert s.sd == pytest.approx(math.sqrt(2.5))
    assert s.ci_low == pytest.approx(3.0 - 2.7764451 * se, abs=1e-6)
    assert s.ci_high == pytest.approx(3.0 + 2.7764451 * se, abs=1e-6)
    assert s.ci_low == pytest.approx(1.0367568, abs=1e-6)
    assert s.half_width == pytest.approx(1.9632432, abs=1e-6)
    # t = 3 / se = 4.2426; two-sided p for df=4
    assert s.p_value == pytest.approx(2 * (1 - t_cdf(3.0 / se, 4)))
    assert s.p_value == pytest.approx(0.013236, abs=1e-5)
    assert s.mde == pytest.approx((2.7764451 + 0.9409646) * math.sqrt(2.5) / math.sqrt(5), abs=1e-6)


def test_paired_summary_edge_cases() -> None:
    empty = paired_summary([])
    assert empty.n == 0 and math.isnan(empty.mean)
    one = paired_summary([2.0])
    assert one.n == 1 and one.mean == 2.0 and math.isnan(one.ci_low) and math.isnan(one.p_value)
    flat = paired_summary([1.5] * 4)
    assert (flat.ci_low, flat.ci_high, flat.p_value, flat.mde) == (1.5, 1.5, 0.0, 0.0)
    zero = paired_summary([0.0, 0.0])
    assert zero.p_value == 1.0
    assert paired_summary([1.0, float("nan"), 3.0]).n == 2


def test_mde_and_cv() -> None:
    assert math.isnan(min_detectable_effect(1.0, 1))
    assert min_detectable_effect(2.0, 5) == pytest.approx((2.7764451 + 0.9409646) * 2 / math.sqrt(5), abs=1e-6)
    assert coefficient_of_variation([1.0, 2.0, 3.0]) == pytest.approx(0.5)
    assert math.isnan(coefficient_of_variation([0.0, 0.0]))
    assert sample_std([2.0, 4.0]) == pytest.approx(math.sqrt(2))
    assert median([3.0, 1.0, 2.0, 10.0]) == 2.5
