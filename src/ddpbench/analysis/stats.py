"""Pure statistics for paired overhead comparisons: Student's paired t interval and test, MDE, distributions.

The t, normal and F distribution functions are scipy's special functions, without importing ``scipy.stats``
(about a second of start-up). Methods and references: docs/analysis.md."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from scipy import special as _special

NAN = float("nan")

INTERVAL_METHOD = "Student's paired t interval"
TEST_METHOD = "two-sided paired t test"
MDE_METHOD = "paired t, alpha=0.05 two-sided, power=0.80"


def to_float(value: object) -> float:
    """``value`` as a float; NaN when it is not a number (None, text, ...)."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return NAN


def _finite(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean of the finite values; NaN when there are none."""
    xs = _finite(values)
    return math.fsum(xs) / len(xs) if xs else NAN


def median(values: Sequence[float]) -> float:
    """Median of the finite values; NaN when there are none."""
    xs = _finite(values)
    return statistics.median(xs) if xs else NAN


def sample_std(values: Sequence[float]) -> float:
    """Sample standard deviation (denominator n − 1) of the finite values; NaN when n < 2."""
    xs = _finite(values)
    n = len(xs)
    if n < 2:
        return NAN
    m = math.fsum(xs) / n
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (n - 1))


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation of the finite values; the SD is 0 when it is rounding noise of the mean."""
    m, sd = mean(values), sample_std(values)
    return m, 0.0 if sd <= 1e-12 * max(1.0, abs(m)) else sd


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation over the mean, as a fraction (0.01 = 1 %); NaN when undefined."""
    m, s = mean(values), sample_std(values)
    return s / abs(m) if math.isfinite(s) and math.isfinite(m) and m != 0 else NAN


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t distribution with ``df`` degrees of freedom (``scipy.stats.t.cdf``)."""
    if df <= 0:
        raise ValueError(f"df must be positive, got {df}")
    return float(_special.stdtr(df, t))


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t distribution with ``df`` degrees of freedom (``scipy.stats.t.sf``)."""
    return t_cdf(-t, df)


def t_ppf(p: float, df: float) -> float:
    """The quantile t(p, df) of Student's t distribution (``scipy.stats.t.ppf``; inverse of :func:`t_cdf`)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"df must be positive, got {df}")
    return float(_special.stdtrit(df, p))


def t_isf(p: float, df: float) -> float:
    """The t with P(T > t) = p (``scipy.stats.t.isf``; inverse of :func:`t_sf`): +inf at p = 0 and -inf at
    p = 1, as there (``stdtrit`` itself gives +inf at both ends); NaN outside [0, 1]."""
    if df <= 0:
        raise ValueError(f"df must be positive, got {df}")
    if not 0.0 < p < 1.0:
        return math.inf if p == 0.0 else -math.inf if p == 1.0 else NAN
    return -float(_special.stdtrit(df, p))


def normal_cdf(z: float) -> float:
    """P(Z ≤ z) for the standard normal distribution (``scipy.stats.norm.cdf``)."""
    return float(_special.ndtr(z))


def normal_sf(z: float) -> float:
    """P(Z > z) for the standard normal distribution (``scipy.stats.norm.sf``)."""
    return normal_cdf(-z)


def normal_isf(p: float) -> float:
    """The z with P(Z > z) = p for the standard normal distribution (``scipy.stats.norm.isf``)."""
    return -float(_special.ndtri(p))


def f_sf(x: float, dfn: float, dfd: float) -> float:
    """P(F > x) for the F distribution with ``dfn`` and ``dfd`` degrees of freedom (``scipy.stats.f.sf``)."""
    return float(_special.fdtrc(dfn, dfd, x))


def min_detectable_effect(sd: float, n: int, alpha: float = 0.05, power: float = 0.80) -> float:
    """Smallest true mean difference (``sd``'s unit) a two-sided paired t test detects with ``power``; NaN when
    n < 2 or ``sd`` is not finite."""
    if n < 2 or not math.isfinite(sd):
        return NAN
    df = n - 1
    return (t_ppf(1.0 - alpha / 2.0, df) + t_ppf(power, df)) * sd / math.sqrt(n)


@dataclass(frozen=True)
class PairedSummary:
    """Summary of paired differences (their unit): location, spread, the paired t interval at ``confidence``, the t
    test's p-value of zero mean and the MDE at 80 % power (the last three NaN when n < 2)."""

    n: int
    mean: float
    median: float
    min: float
    max: float
    sd: float
    ci_low: float
    ci_high: float
    p_value: float
    mde: float
    confidence: float = 0.95

    @property
    def half_width(self) -> float:
        """Half the interval's width; NaN when there is no interval."""
        return (self.ci_high - self.ci_low) / 2.0


def paired_summary(differences: Sequence[float], confidence: float = 0.95) -> PairedSummary:
    """Describe paired differences: location, spread, t interval, t test p-value, MDE."""
    xs = _finite(differences)
    n = len(xs)
    if n == 0:
        return PairedSummary(0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, confidence)
    m, sd = mean_sd(xs)
    lo = hi = p = mde = NAN
    if n >= 2:
        df = n - 1
        se = sd / math.sqrt(n)
        if se == 0.0:
            lo = hi = m
            p = 1.0 if m == 0.0 else 0.0
        else:
            half = t_ppf(1.0 - (1.0 - confidence) / 2.0, df) * se
            lo, hi = m - half, m + half
            p = min(1.0, 2.0 * t_sf(abs(m) / se, df))
        mde = min_detectable_effect(sd, n, alpha=1.0 - confidence)
    return PairedSummary(n, m, median(xs), min(xs), max(xs), sd, lo, hi, p, mde, confidence)
