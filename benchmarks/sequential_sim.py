"""The stopping rule of ``repeat=auto``, simulated: false-verdict rate and pairs to a verdict.

Runs :func:`ddpbench.analysis.sequential.replay` (the rule the sweeper applies after each pair) on
seeded synthetic per-pair overheads, no trials. Per spending function, max_pairs and noise level
it prints:

- the **false-verdict rate**: true overhead exactly at the budget, so every decisive verdict
  ("over" or "within") is false; the rule promises at most α = 1 − confidence (and a false "over"
  at most α/2). For contrast, the rate of the naive rule (stop on the first decisive fixed 95 %
  t interval);
- the **pairs used** (to a verdict, else to max_pairs) for a known per-step overhead (default
  +10 %) against the budget (default 2 %): mean and 90th percentile, and the share decided "over"
  and decided "over" within 6 pairs.

Noise: the SD of the per-pair overhead in percentage points (the per-pair overhead's coefficient
of variation relative to the baseline step time), normal or Student-t with 3 degrees of freedom
(heavy tails, scaled to the same SD). Usage::

    python benchmarks/sequential_sim.py [--noise-sd 3 6] [--max-pairs 10 20] [--reps 4000] [--out FILE]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_line, now_utc, write_out  # noqa: E402

from ddpbench.analysis.sequential import SPENDING_FUNCTIONS, replay  # noqa: E402


def noise(rng: np.random.Generator, kind: str, sd: float, shape: tuple[int, int]) -> np.ndarray:
    """Per-pair noise with standard deviation ``sd`` (percentage points)."""
    if kind == "normal":
        return sd * rng.standard_normal(shape)
    return sd * rng.standard_t(3, shape) / math.sqrt(3.0)  # t(3) has variance 3


def naive_false_rate(data: np.ndarray, budget: float, min_pairs: int, alpha: float) -> float:
    """Share of rows where some fixed-level t interval at n = min_pairs … excludes the budget."""
    false = np.zeros(len(data), dtype=bool)
    for n in range(min_pairs, data.shape[1] + 1):
        x = data[:, :n]
        half = st.t.isf(alpha / 2, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
        m = x.mean(axis=1)
        false |= (m - half > budget) | (m + half < budget)
    return float(false.mean())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--noise-sd", type=float, nargs="+", default=[3.0, 6.0], help="SD of the per-pair overhead, points")
    p.add_argument("--noise", nargs="+", default=["normal", "t3"], choices=["normal", "t3"])
    p.add_argument("--max-pairs", type=int, nargs="+", default=[10, 20])
    p.add_argument("--min-pairs", type=int, default=3)
    p.add_argument("--effect", type=float, default=10.0, help="true per-step overhead, %%")
    p.add_argument("--budget", type=float, default=2.0, help="%%")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--reps", type=int, default=4000, help="replications per cell")
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--out", type=Path, help="also write the table (markdown; JSON when it ends in .json)")
    args = p.parse_args(argv)
    alpha = 1.0 - args.confidence
    se = math.sqrt(alpha * (1 - alpha) / args.reps)
    lines = [
        f"sequential_sim  {now_utc()}",
        machine_line(),
        f"rule: ddpbench.analysis.sequential, {args.confidence:.0%} overall, min_pairs={args.min_pairs}; "
        f"budget {args.budget:g} %; {args.reps} replications per row, seed {args.seed}; "
        f"binomial SE of a rate at alpha: {100 * se:.2f} points",
        "",
        "| spending | max_pairs | noise | SD (pt) | false verdict at budget | false over | naive rule | "
        f"pairs used at +{args.effect:g} % (mean / p90) | decided over | over within 6 pairs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    rng = np.random.default_rng(args.seed)
    for spending in SPENDING_FUNCTIONS:
        for max_pairs in args.max_pairs:
            for kind in args.noise:
                for sd in args.noise_sd:
                    null = args.budget + noise(rng, kind, sd, (args.reps, max_pairs))
                    rule = (args.budget, args.confidence, None, args.min_pairs, max_pairs, spending)
                    at_budget = [replay(r.tolist(), *rule).reason for r in null]
                    false = sum(r in ("over", "within") for r in at_budget) / args.reps
                    false_over = sum(r == "over" for r in at_budget) / args.reps
                    naive = naive_false_rate(null, args.budget, args.min_pairs, alpha)
                    alt = args.effect + noise(rng, kind, sd, (args.reps, max_pairs))
                    runs = [replay(r.tolist(), *rule) for r in alt]
                    ns = np.array([d.n for d in runs])
                    over = np.array([d.reason == "over" for d in runs])
                    rows.append({"spending": spending, "max_pairs": max_pairs, "noise": kind, "noise_sd_pt": sd,
                                 "false_verdict_rate": false, "false_over_rate": false_over, "naive_false_rate": naive,
                                 "pairs_mean": float(ns.mean()), "pairs_p90": float(np.percentile(ns, 90)),
                                 "over_rate": float(over.mean()), "over_within_6_rate": float((over & (ns <= 6)).mean())})
                    lines.append(
                        f"| {spending} | {max_pairs} | {kind} | {sd:g} | {100 * false:.2f} % | "
                        f"{100 * false_over:.2f} % | {100 * naive:.1f} % | "
                        f"{ns.mean():.2f} / {np.percentile(ns, 90):.0f} | "
                        f"{100 * over.mean():.1f} % | {100 * (over & (ns <= 6)).mean():.1f} % |"
                    )
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        settings = vars(args) | {"out": str(args.out)}
        write_out(args.out, text, {"generated": lines[0], "machine": lines[1], "settings": settings, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
