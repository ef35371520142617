"""The history's step detection on simulated series: false-alarm rate without a step, power with one.

Each simulated series has ``--points`` points; each point is a sweep's per-step overhead from ``--pairs``
pairs whose per-pair SD is 1 (so a point's standard error is 1/sqrt(pairs): the figures are in units of
the per-pair SD), plus a spread between sweeps τ (in units of the point's own standard error) that the
points' intervals do not hold. Scenarios: no step; a step of ``--step`` standard errors halfway; a slow
drift of the same total over the whole series. Every series goes through
:func:`ddpbench.analysis.changepoint.find_steps` as ``ddpbench-report --history`` runs it (its default
draws and alpha), and through the rule it replaced (a step where two neighbouring 95 % t intervals do
not overlap), for comparison. Usage::

    python benchmarks/changepoint_sim.py [--series 400] [--points 5 8 12] [--pairs 5] [--step 3] [--out FILE]

About 3 minutes on a 2-core VM at the defaults.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import emit, machine_line, now_utc  # noqa: E402
from ddpbench.analysis.changepoint import ALPHA, MIN_POINTS_FOR_SPREAD, find_steps  # noqa: E402
from ddpbench.analysis.stats import t_isf  # noqa: E402


def simulate(rng: np.random.Generator, points: int, pairs: int, shape: str, size: float,
             spread: float) -> tuple[np.ndarray, np.ndarray]:
    """One series: (means, standard errors). ``size`` and ``spread`` in units of a point's true standard error."""
    true_se = 1.0 / np.sqrt(pairs)
    sd = np.sqrt(rng.chisquare(pairs - 1, points) / (pairs - 1))  # each sweep's own SD estimate
    means = rng.normal(0.0, np.sqrt(true_se ** 2 * (1 + spread ** 2)), points)
    if shape == "step":
        means[points // 2:] += size * true_se
    elif shape == "drift":
        means += np.linspace(0.0, size * true_se, points)
    return means, sd / np.sqrt(pairs)


def overlap_rule(means: np.ndarray, ses: np.ndarray, pairs: int) -> bool:
    """The replaced rule: some neighbouring 95 % t intervals do not overlap."""
    half = t_isf(0.025, pairs - 1) * ses
    return bool(np.any((means[1:] - half[1:] > means[:-1] + half[:-1]) | (means[1:] + half[1:] < means[:-1] - half[:-1])))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--series", type=int, default=400, help="simulated series per cell")
    p.add_argument("--points", type=int, nargs="+", default=[3, 5, 8, 12])
    p.add_argument("--pairs", type=int, default=5, help="pairs behind each point")
    p.add_argument("--step", type=float, default=3.0, help="step (and drift total), in standard errors of a point")
    p.add_argument("--spread", type=float, default=1.0, help="between-sweep spread τ, in standard errors of a point")
    p.add_argument("--seed", type=int, default=20261204)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started, t0 = now_utc(), time.monotonic()
    cells = [("no step", "none", 0.0, 0.0), ("no step", "none", 0.0, args.spread),
             (f"step {args.step:g} se", "step", args.step, 0.0), (f"step {args.step:g} se", "step", args.step, args.spread),
             (f"drift {args.step:g} se", "drift", args.step, 0.0)]
    lines = [f"changepoint_sim  {started}", machine_line(),
             f"{args.series} series per cell, {args.pairs} pairs per point, alpha {ALPHA:g}; the spread between sweeps "
             f"is estimated from {MIN_POINTS_FOR_SPREAD}+ points", "",
             "| points | scenario | spread τ (se) | steps found: change-point method | found at the true place | "
             "replaced rule: neighbouring intervals do not overlap |", "|---|---|---|---|---|---|"]
    for points in args.points:
        for name, shape, size, spread in cells:
            found = placed = overlap = 0
            for i in range(args.series):
                means, ses = simulate(rng, points, args.pairs, shape, size, spread)
                fit = find_steps(means.tolist(), ses.tolist(), [args.pairs] * points, seed=i)
                found += bool(fit.steps)
                placed += any(s.index == points // 2 for s in fit.steps)
                overlap += overlap_rule(means, ses, args.pairs)
            where = f"{100 * placed / args.series:.1f} %" if shape == "step" else ""
            lines.append(f"| {points} | {name} | {spread:g} | {100 * found / args.series:.1f} % | {where} | "
                         f"{100 * overlap / args.series:.1f} % |")
    emit([*lines, "", f"{time.monotonic() - t0:.0f} s"], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
