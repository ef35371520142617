"""Robust statistics of per-pair differences (the metric's unit): Hodges–Lehmann, Wilcoxon, bootstrap. Pure.

The Wilcoxon interval is exact up to :data:`EXACT_MAX_N` pairs, else normal; an unreachable level gives [min, max]
at its achieved level, as R's ``wilcox.test`` does. References: docs/analysis.md."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ddpbench.analysis.stats import normal_cdf, normal_isf

#: largest n whose signed-rank null distribution is counted exactly (O(n³) work, ~4 M steps at 200)
EXACT_MAX_N = 200
NAN = math.nan


def _values(differences: Sequence[float] | np.ndarray) -> np.ndarray:
    xs = np.asarray([float(v) for v in differences], dtype=float)
    if not np.all(np.isfinite(xs)):
        raise ValueError(f"differences must be finite numbers, got {xs[~np.isfinite(xs)][0]}")
    return xs


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def walsh_averages(differences: Sequence[float] | np.ndarray) -> np.ndarray:
    """The sorted n(n + 1)/2 Walsh averages (x_i + x_j)/2, i ≤ j, in the differences' unit."""
    xs = _values(differences)
    i, j = np.triu_indices(len(xs))
    return np.sort((xs[i] + xs[j]) / 2.0)


def hodges_lehmann(differences: Sequence[float]) -> float:
    """Hodges–Lehmann location estimate: the median of the Walsh averages; NaN when empty."""
    w = walsh_averages(differences)
    return float(np.median(w)) if w.size else NAN


def signed_rank_cdf(n: int) -> np.ndarray:
    """P(T ≤ t) for t = 0 … n(n + 1)/2 of the Wilcoxon signed-rank statistic with n untied pairs, exact: counted
    by convolution one rank at a time."""
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    pmf = np.zeros(n * (n + 1) // 2 + 1)
    pmf[0] = 1.0
    for r in range(1, n + 1):
        top = r * (r + 1) // 2
        shifted = np.zeros_like(pmf)
        shifted[r : top + 1] = pmf[: top + 1 - r]
        pmf = 0.5 * (pmf + shifted)
    return np.minimum(np.cumsum(pmf), 1.0)


@dataclass(frozen=True)
class WilcoxonInterval:
    """Hodges–Lehmann estimate and the Wilcoxon signed-rank interval (differences' unit; NaN when n < 2), with its
    coverage (``achieved_confidence``: ≥ ``confidence`` unless that is unreachable with n pairs)."""

    n: int
    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    achieved_confidence: float
    exact: bool


def wilcoxon_interval(differences: Sequence[float] | np.ndarray, confidence: float = 0.95) -> WilcoxonInterval:
    """Hodges–Lehmann estimate with its Wilcoxon signed-rank confidence interval."""
    _check_confidence(confidence)
    w = walsh_averages(differences)
    m = w.size
    n = int(round((math.sqrt(8 * m + 1) - 1) / 2))
    if n < 2:
        return WilcoxonInterval(n, float(w[0]) if m else NAN, NAN, NAN, confidence, NAN, True)
    half_alpha = (1.0 - confidence) / 2.0
    exact = n <= EXACT_MAX_N
    if exact:
        cdf = signed_rank_cdf(n)
        # k = number of Walsh averages cut from each end = #{t : P(T ≤ t) ≤ α/2}
        k = int(np.searchsorted(cdf, half_alpha * (1 + 1e-12), side="right"))
        tail = float(cdf[k - 1]) if k > 0 else 0.0
    else:
        mu, sd = m / 2.0, math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
        k = max(0, int(math.floor(mu - normal_isf(half_alpha) * sd - 0.5)) + 1)
        tail = normal_cdf((k - 1 + 0.5 - mu) / sd) if k > 0 else 0.0
    if k == 0:
        # the requested level is unreachable: the widest finite interval, [min, max]
        k, tail = 1, float(0.5**n)
    return WilcoxonInterval(n, float(np.median(w)), float(w[k - 1]), float(w[m - k]), confidence,
                            1.0 - 2.0 * tail, exact)


@dataclass(frozen=True)
class BootstrapInterval:
    """A bootstrap interval of ``statistic`` ("mean" or "median") of the differences (their unit; NaN when n < 2);
    ``method`` the one used (BCa falls back to percentile when its acceleration is undefined)."""

    n: int
    statistic: str
    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    method: str
    n_resamples: int
    seed: int


_STATISTICS: dict[str, Callable[[np.ndarray], Any]] = {"mean": np.mean, "median": np.median}


def bootstrap_interval(differences: Sequence[float] | np.ndarray, statistic: str = "mean", confidence: float = 0.95,
                       n_resamples: int = 9999, seed: int = 0, method: str = "BCa") -> BootstrapInterval:
    """Seeded ``scipy.stats.bootstrap`` interval of the mean or median difference."""
    from scipy import stats  # about a second to import: only a sweep of two pairs or more pays it

    _check_confidence(confidence)
    if statistic not in _STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; choose mean or median")
    if method not in ("BCa", "percentile"):
        raise ValueError(f"unknown bootstrap method {method!r}; choose BCa or percentile")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    xs = _values(differences)
    func = _STATISTICS[statistic]
    est = float(func(xs)) if xs.size else NAN
    if xs.size < 2:
        return BootstrapInterval(xs.size, statistic, est, NAN, NAN, confidence, method, n_resamples, seed)
    if np.all(xs == xs[0]):
        return BootstrapInterval(xs.size, statistic, est, est, est, confidence, method, n_resamples, seed)
    used = method
    lo = hi = NAN
    for used in ((method, "percentile") if method == "BCa" else (method,)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap((xs,), func, confidence_level=confidence, n_resamples=n_resamples,
                                method=used, rng=np.random.default_rng(seed), vectorized=True, axis=-1)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            break
    return BootstrapInterval(xs.size, statistic, est, lo, hi, confidence, used, n_resamples, seed)
