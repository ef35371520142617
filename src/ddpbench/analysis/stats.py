"""Pure statistics for paired overhead comparisons.

Everything here is a function of plain sequences of floats; nothing reads files or
knows about trials. Methods (see ``docs/analysis.md``):

- **Interval**: Student's paired *t* interval on the per-pair differences,
  ``mean ± t(1 − α/2, n − 1) · s / √n`` (Student 1908; e.g. NIST/SEMATECH e-Handbook §7.2.2).
- **p-value**: the two-sided paired *t* test of "mean difference = 0" (same statistic).
- **Minimum detectable effect (MDE)**: the smallest true mean difference the paired *t* test
  detects with 80 % power at α = 0.05, ``(t(1 − α/2, n − 1) + t(power, n − 1)) · s / √n``
  (the usual central-*t* approximation, Cohen 1988, ch. 2).
- **Coefficient of variation**: sample standard deviation (n − 1) over the mean.

The Student *t* CDF is computed from the regularized incomplete beta function
(continued fraction, Lentz's method, as in Press et al., *Numerical Recipes* 3rd ed. §6.4);
its quantile by bisection on the CDF. No SciPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = [
    "PairedSummary",
    "coefficient_of_variation",
    "mean",
    "median",
    "min_detectable_effect",
    "paired_summary",
    "regularized_incomplete_beta",
    "sample_std",
    "t_cdf",
    "t_ppf",
    "to_float",
]

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
    xs = sorted(_finite(values))
    n = len(xs)
    if n == 0:
        return NAN
    mid = n // 2
    return xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2.0


def sample_std(values: Sequence[float]) -> float:
    """Sample standard deviation (denominator n − 1) of the finite values; NaN when n < 2."""
    xs = _finite(values)
    n = len(xs)
    if n < 2:
        return NAN
    m = math.fsum(xs) / n
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (n - 1))


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation over the mean, as a fraction (0.01 = 1 %); NaN when undefined."""
    m = mean(values)
    s = sample_std(values)
    if not math.isfinite(s) or not math.isfinite(m) or m == 0:
        return NAN
    return s / abs(m)


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = tiny if abs(d) < tiny else d
    d = 1.0 / d
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 ≤ x ≤ 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t distribution with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"df must be positive, got {df}")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_ppf(p: float, df: float) -> float:
    """The quantile t(p, df) of Student's t distribution (inverse of :func:`t_cdf`)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def min_detectable_effect(sd: float, n: int, alpha: float = 0.05, power: float = 0.80) -> float:
    """Smallest true mean difference a two-sided paired t test detects with ``power``.

    Units are those of ``sd`` (the standard deviation of the paired differences).
    NaN when n < 2 or ``sd`` is not finite.
    """
    if n < 2 or not math.isfinite(sd):
        return NAN
    df = n - 1
    return (t_ppf(1.0 - alpha / 2.0, df) + t_ppf(power, df)) * sd / math.sqrt(n)


@dataclass(frozen=True)
class PairedSummary:
    """Summary of paired differences (units of the differences; percent for overheads).

    ``ci_low``/``ci_high`` are the Student's paired t interval at ``confidence``; ``p_value`` is
    the two-sided paired t test of zero mean difference; ``mde`` the minimum detectable effect
    at 80 % power. Interval, p-value and MDE are NaN when n < 2.
    """

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
    m = mean(xs)
    sd = sample_std(xs)
    lo = hi = p = mde = NAN
    if n >= 2:
        df = n - 1
        if sd <= 1e-12 * max(1.0, abs(m)):
            sd = 0.0
        se = sd / math.sqrt(n)
        if se == 0.0:
            lo = hi = m
            p = 1.0 if m == 0.0 else 0.0
        else:
            half = t_ppf(1.0 - (1.0 - confidence) / 2.0, df) * se
            lo, hi = m - half, m + half
            p = min(1.0, 2.0 * (1.0 - t_cdf(abs(m) / se, df)))
        mde = min_detectable_effect(sd, n, alpha=1.0 - confidence)
    return PairedSummary(n, m, median(xs), min(xs), max(xs), sd, lo, hi, p, mde, confidence)
