"""The verdict's combined rule, simulated: how often it is wrong, and how often it decides.

Simulates sweeps of a ``switching=blocks`` comparison through the same functions the report uses
(:func:`ddpbench.analysis.verdict.verdict_for` on :func:`ddpbench.analysis.stats.paired_summary` and
:func:`ddpbench.analysis.switching.combine`) and, for ``repeat=auto``, the sweeper's
:func:`ddpbench.analysis.sequential.decide_with_lower_bound` after every pair. No trials run.

Model, in % of the baseline's step (the per-step overheads' unit). Per pair: the tool-fully-on per-step cost
``B ~ N(mu_step, sd_between)`` (the on-blocks' between-trial figure), its projection ``B + fixed`` (the fixed
cost over the job, ``--fixed`` points, with 10 % noise), and the mode trial's within-trial quads
``mu_switched + trial effect ~ N(0, sd_trial) + N(0, sd_quad)``, ``--quads`` of them. The switchable part
``mu_switched`` never exceeds ``mu_step`` (what stays on costs nothing negative: the rule's assumption); the trial
effect is a heterogeneity between trials that five trials' F test rarely sees, which makes the pooled within-trial
interval a little optimistic.

Rows: the projected cost exactly at the budget (every decisive verdict is false; the rule promises a false ``over``
at most 3α/4 and a false ``within`` at most α/2, α = 1 − confidence), all of the per-step cost switchable (the
hardest case for ``over``: two figures at the boundary) or half; an A/A comparison (nothing costs anything: ``over``
is false, ``within`` right); and tools clearly over (the share decided ``over``, and by the lower bound). Default
noise: the spreads of the README's main command on the 2-core CPU VM (per-pair SD ≈ 11 % of the step; per quad
≈ 12 %; docs/analysis.md); ``--fixed 0`` by default, so per-step and projected coincide. Usage::

    python benchmarks/verdict_error_rates.py [--reps 4000] [--pairs 5] [--max-pairs 12] [--out FILE]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_line, now_utc, write_out  # noqa: E402

from ddpbench.analysis.sequential import decide_with_lower_bound  # noqa: E402
from ddpbench.analysis.stats import paired_summary  # noqa: E402
from ddpbench.analysis.switching import TrialSwitch, combine  # noqa: E402
from ddpbench.analysis.verdict import LOWER_BOUND, lower_bound_confidence, verdict_for  # noqa: E402
from ddpbench.choices import Verdict  # noqa: E402


@dataclass(frozen=True)
class Case:
    """One row: the true per-step cost (the tool fully on) and its switchable part, % of the step."""

    name: str
    step: float
    switched: float


@dataclass(frozen=True)
class Noise:
    """Spreads, points of the step: between pairs, between trials of the within-trial figure, per quad."""

    between: float
    trial: float
    quad: float
    quads: int
    fixed: float


def simulate_pair(rng: np.random.Generator, case: Case, noise: Noise) -> tuple[float, float, TrialSwitch]:
    """One pair: (whole-cost per-step %, projected %, the mode trial's within-trial estimate)."""
    whole = case.step + noise.between * rng.standard_normal()
    projected = whole + noise.fixed * (1.0 + 0.1 * rng.standard_normal())
    quads = case.switched + noise.trial * rng.standard_normal() + noise.quad * rng.standard_normal(noise.quads)
    se = float(quads.std(ddof=1) / math.sqrt(noise.quads)) if noise.quads > 1 else None
    return whole, projected, TrialSwitch(overhead_ms=float(quads.mean()), se_ms=se, off_step_ms=100.0,
                                         quads=noise.quads)


def fixed_n(rng: np.random.Generator, case: Case, noise: Noise, pairs: int, budget: float) -> tuple[str, tuple[str, ...]]:
    """The report's verdict on one simulated sweep of ``pairs`` pairs: (status, deciding figures)."""
    sim = [simulate_pair(rng, case, noise) for _ in range(pairs)]
    metrics = {"step_overhead_pct": paired_summary([w for w, _, _ in sim]), "projected_overhead_pct": paired_summary([p for _, p, _ in sim])}
    level = lower_bound_confidence(0.95)
    verdict = verdict_for(metrics, budget, combine([t for _, _, t in sim], level), level)
    return verdict.status, verdict.decided_by


def sequential(rng: np.random.Generator, case: Case, noise: Noise, max_pairs: int, budget: float) -> tuple[Verdict, int, bool]:
    """``repeat=auto`` on one simulated sweep: (verdict, pairs used, whether the lower bound decided)."""
    sim = [simulate_pair(rng, case, noise) for _ in range(max_pairs)]
    projected = [p for _, p, _ in sim]
    lower = [t.overhead_ms for _, _, t in sim]  # off step 100: ms are % here
    for n in range(3, max_pairs + 1):
        d = decide_with_lower_bound(projected[:n], lower[:n], budget, 0.95, None, 3, max_pairs)
        if d.stop:
            return d.verdict, n, d.message.startswith("within-trial")
    return Verdict.inconclusive, max_pairs, False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=4000, help="simulated sweeps per row")
    p.add_argument("--pairs", type=int, default=5, help="pairs of a fixed-size sweep (repeat=1-5)")
    p.add_argument("--max-pairs", type=int, default=12, help="repeat=auto's precision.max_pairs")
    p.add_argument("--budget", type=float, default=2.0, help="%%")
    p.add_argument("--sd-between", type=float, default=11.0, help="per-pair SD of the whole cost, points")
    p.add_argument("--sd-trial", type=float, default=1.0, help="SD of the within-trial figure between trials, points")
    p.add_argument("--sd-quad", type=float, default=12.0, help="SD of one ABBA quad, points")
    p.add_argument("--quads", type=int, default=25, help="quads per trial")
    p.add_argument("--fixed", type=float, default=0.0, help="fixed cost over the job, points")
    p.add_argument("--seed", type=int, default=41)
    p.add_argument("--out", type=Path, help="also write the table (markdown; JSON when it ends in .json)")
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    noise = Noise(args.sd_between, args.sd_trial, args.sd_quad, args.quads, args.fixed)
    b = args.budget
    at = b - args.fixed  # the per-step cost whose projection is exactly the budget
    cases = [Case("at the budget, all switchable", at, at), Case("at the budget, half switchable", at, at / 2),
             Case("A/A: nothing costs anything", 0.0, 0.0),
             Case(f"clearly over: {3 * b:g} %, {1.5 * b:g} switchable", 3 * b, 1.5 * b),
             Case(f"clearly over: {6 * b:g} %, {3 * b:g} switchable", 6 * b, 3 * b)]
    se = math.sqrt(0.05 * 0.95 / args.reps)
    lines = [f"verdict_error_rates  {now_utc()}", machine_line(),
             f"budget {b:g} %; noise: between {noise.between:g}, trial {noise.trial:g}, quad {noise.quad:g} points, "
             f"{noise.quads} quads/trial, fixed {noise.fixed:g}; {args.reps} sweeps per row, seed {args.seed}; "
             f"binomial SE of a rate near 5 %: {100 * se:.2f} points", "",
             f"| case | fixed n={args.pairs}: over | within | decided by the lower bound | repeat=auto (max {args.max_pairs}): "
             "over | within | by the lower bound | pairs used (mean) |", "|---|---|---|---|---|---|---|---|"]
    rows = []
    for case in cases:
        fixed = [fixed_n(rng, case, noise, args.pairs, b) for _ in range(args.reps)]
        over = sum(s == Verdict.over for s, _ in fixed) / args.reps
        within = sum(s == Verdict.within for s, _ in fixed) / args.reps
        by_bound = sum(s == Verdict.over and LOWER_BOUND in d for s, d in fixed) / args.reps
        auto = [sequential(rng, case, noise, args.max_pairs, b) for _ in range(args.reps)]
        a_over = sum(r == Verdict.over for r, _, _ in auto) / args.reps
        a_within = sum(r == Verdict.within for r, _, _ in auto) / args.reps
        a_bound = sum(bound for _, _, bound in auto) / args.reps
        used = sum(n for _, n, _ in auto) / args.reps
        rows.append({"case": case.name, "fixed_over": over, "fixed_within": within, "fixed_by_lower_bound": by_bound,
                     "auto_over": a_over, "auto_within": a_within, "auto_by_lower_bound": a_bound, "auto_pairs": used})
        lines.append(f"| {case.name} | {100 * over:.2f} % | {100 * within:.2f} % | {100 * by_bound:.2f} % | "
                     f"{100 * a_over:.2f} % | {100 * a_within:.2f} % | {100 * a_bound:.2f} % | {used:.1f} |")
    alpha = 100 * (1 - 0.95)
    lines += ["", f"At the budget every decisive verdict is false: the rule promises over ≤ {0.75 * alpha:g} % and within "
              f"≤ {alpha / 2:g} %. In the A/A row over is false and within right; in the rows clearly over, over is right "
              "and within false."]
    text = "\n".join(lines)
    print(text)
    write_out(args.out, text + "\n", {"rows": rows, "budget_pct": b, "noise": noise.__dict__, "reps": args.reps})
    return 0


if __name__ == "__main__":
    sys.exit(main())
