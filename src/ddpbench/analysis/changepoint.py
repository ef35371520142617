"""Step changes in a series of points that carry their own uncertainty (mean, standard error, pairs). Pure.

Weighted binary segmentation with a p-value simulated under "no step" from a fixed seed, so the same history gives
the same answer. Method, false-alarm rate and power: docs/versions.md."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np

#: the false-alarm rate per series a step is tested at
ALPHA = 0.05
#: simulated series per test
DRAWS = 2000
#: the fewest tested points from which the spread between sweeps (τ) is estimated
MIN_POINTS_FOR_SPREAD = 4
#: the median of χ² with 1 degree of freedom
_CHI2_1_MEDIAN = 0.454936423119572
_Z_975 = 1.959963984540054
METHOD = ("weighted binary segmentation: max over splits of the standardised difference of inverse-variance "
          "weighted segment means (variance = the point's se² + the between-sweep spread τ², τ estimated from "
          f"successive differences with {MIN_POINTS_FOR_SPREAD}+ points), p-value by simulating the series under "
          "no step (means, standard errors and τ drawn again), a step where p < alpha")


@dataclass(frozen=True)
class Step:
    """One step found: the level moves between point ``index − 1`` and point ``index`` (input indices)."""

    index: int
    # weighted means of the segments on either side, and after − before with its 95 % interval (the points' unit)
    before: float
    after: float
    delta: float
    ci_low: float
    ci_high: float
    # the simulated p-value of the test that found it
    p_value: float


@dataclass(frozen=True)
class ChangePoints:
    """What :func:`find_steps` found in one series."""

    steps: Tuple[Step, ...]
    # the between-sweep spread τ used (the points' unit), and whether it was estimated (enough points)
    spread: float
    spread_estimated: bool
    # input indices of the points tested (those with a finite mean and standard error)
    tested: Tuple[int, ...]
    alpha: float
    # each level between steps: (input index of its first point, of its last point, its weighted mean)
    levels: Tuple[Tuple[int, int, float], ...] = ()


def _spread_sq(diffs_sq: np.ndarray, pair_var: np.ndarray) -> np.ndarray:
    """τ² per row (rows vectorised): the larger of the moment estimate and the median-matching one, at least 0."""
    moment = np.maximum(np.mean(diffs_sq - pair_var, axis=1) / 2, 0.0)
    low = np.zeros(diffs_sq.shape[0])
    high = np.max(diffs_sq, axis=1) / (2 * _CHI2_1_MEDIAN) + 1e-300
    need = np.median(diffs_sq / pair_var, axis=1) > _CHI2_1_MEDIAN
    for _ in range(60):
        mid = (low + high) / 2
        over = np.median(diffs_sq / (pair_var + 2 * mid[:, None]), axis=1) > _CHI2_1_MEDIAN
        low, high = np.where(over, mid, low), np.where(over, high, mid)
    return np.maximum(np.where(need, high, 0.0), moment)


def between_spread(means: "Sequence[float] | np.ndarray", ses: "Sequence[float] | np.ndarray") -> float:
    """τ: the spread between points beyond their own standard errors (0 with fewer than MIN_POINTS_FOR_SPREAD)."""
    x, se = np.asarray(means, dtype=float), np.asarray(ses, dtype=float)
    if len(x) < MIN_POINTS_FOR_SPREAD:
        return 0.0
    return float(math.sqrt(_spread_sq(*_successive(x[None, :], (se ** 2)[None, :]))[0]))


def _max_z(x: np.ndarray, var: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per row: max |z_k| over splits k = 1..m−1 and the split attaining it (rows vectorised)."""
    w = 1.0 / var
    cw, cwx = np.cumsum(w, axis=1), np.cumsum(w * x, axis=1)
    w_before, wx_before = cw[:, :-1], cwx[:, :-1]
    w_after, wx_after = cw[:, -1:] - w_before, cwx[:, -1:] - wx_before
    z = (wx_after / w_after - wx_before / w_before) / np.sqrt(1.0 / w_before + 1.0 / w_after)
    best = np.argmax(np.abs(z), axis=1)
    return np.abs(z[np.arange(z.shape[0]), best]), best + 1


def _test(x: np.ndarray, se: np.ndarray, n: np.ndarray, tau_sq: float, estimate: bool, draws: int,
          rng: np.random.Generator) -> Tuple[int, float]:
    """(the best split, its simulated p-value) for one segment; with ``estimate`` the spread is estimated from the
    segment and from each simulated one, else ``tau_sq`` is taken as known."""
    if estimate:
        tau_sq = float(_spread_sq(*_successive(x[None, :], (se ** 2)[None, :]))[0])
    observed, split = _max_z(x[None, :], (se ** 2 + tau_sq)[None, :])
    sim_x = rng.standard_normal((draws, len(x))) * np.sqrt(se ** 2 + tau_sq)
    dof = np.maximum(n - 1, 1)
    sim_se_sq = se ** 2 * rng.chisquare(dof, size=(draws, len(x))) / dof
    sim_tau_sq = _spread_sq(*_successive(sim_x, sim_se_sq))[:, None] if estimate else tau_sq
    sim_t, _ = _max_z(sim_x, sim_se_sq + sim_tau_sq)
    p = (1.0 + float(np.sum(sim_t >= observed[0] - 1e-12))) / (1.0 + draws)
    return int(split[0]), p


def _successive(x: np.ndarray, se_sq: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per row: squared successive differences and the variance their points' own errors give them."""
    return np.diff(x, axis=1) ** 2, np.maximum(se_sq[:, :-1] + se_sq[:, 1:], 1e-300)


def find_steps(means: Sequence[float], ses: Sequence[float], n_pairs: Sequence[int], alpha: float = ALPHA,
               draws: int = DRAWS, seed: int = 0) -> ChangePoints:
    """The steps of one series (points in order: mean, standard error, pairs); see the module docstring."""
    tested = tuple(i for i, (m, s, k) in enumerate(zip(means, ses, n_pairs))
                   if math.isfinite(m) and math.isfinite(s) and s >= 0 and k >= 2)
    x = np.array([means[i] for i in tested], dtype=float)
    se = np.maximum(np.array([ses[i] for i in tested], dtype=float), 1e-12)
    n = np.array([n_pairs[i] for i in tested], dtype=float)
    estimated = len(tested) >= MIN_POINTS_FOR_SPREAD
    tau = between_spread(x, se) if estimated else 0.0
    if len(tested) < 2:
        return ChangePoints((), tau, estimated, tested, alpha)
    rng = np.random.default_rng(seed)
    bounds, queue, p_values = [0, len(x)], [(0, len(x))], {}
    while queue:
        lo, hi = queue.pop(0)
        if hi - lo < 2:
            continue
        split, p = _test(x[lo:hi], se[lo:hi], n[lo:hi], tau * tau, hi - lo >= MIN_POINTS_FOR_SPREAD, draws, rng)
        if p < alpha:
            bounds.append(lo + split)
            p_values[lo + split] = p
            queue += [(lo, lo + split), (lo + split, hi)]
    var = se ** 2 + tau * tau
    edges = sorted(bounds)
    segments = list(zip(edges, edges[1:]))
    fitted = [(float(np.sum(x[a:b] / var[a:b]) / np.sum(1 / var[a:b])), float(np.sum(1 / var[a:b])))
              for a, b in segments]
    steps = []
    for (b, _), (before, w_before), (after, w_after) in zip(segments[1:], fitted, fitted[1:]):
        half = _Z_975 * math.sqrt(1 / w_before + 1 / w_after)
        steps.append(Step(tested[b], before, after, after - before, after - before - half, after - before + half,
                          p_values[b]))
    levels = tuple((tested[a], tested[b - 1], level) for (a, b), (level, _) in zip(segments, fitted))
    return ChangePoints(tuple(steps), tau, estimated, tested, alpha, levels)
