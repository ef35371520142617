"""The release gate's error rates on simulated versions sweeps: A/A (the same release twice) and a known regression.

Each simulated sweep is ``mode=native,traceml versions={traceml:[A, B]} repeat=1-N``: per repeat a machine
factor common to the three trials (``--machine-sd`` %), a native step of ``--step-ms``, the tool's arms at
+10 %, and arm B slower than arm A by the true regression (0 for A/A), each arm with its own log-normal
noise, so that B's per-step Δ % against A has a per-pair SD of about ``--sd`` (log-SD of the ratio
ln(1 + SD/100); a step time stays positive, and a large SD skews the ratio as a loaded machine does). The trials are built as trial.json
records (tests/helpers/trials.py) and go through the same functions as a real sweep's report: the
collector's row (``flatten_trial``) and :func:`ddpbench.analysis.versions.compare_versions` with its
verdict against ``--threshold`` (``regression_pct``). Printed per cell: how often the gate says
``regression`` (exit 1), ``inconclusive`` (exit 3) and ``no regression`` (exit 0). ``--from-sweep DIR``
adds the per-pair SD a real versions sweep measured (its analysis.json). Usage::

    python benchmarks/gate_error_rates.py [--sims 500] [--pairs 6 12 24] [--sd 5] [--regression 5]
        [--threshold 1] [--from-sweep outputs/multirun/aa] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, emit, machine_line, now_utc  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))

from helpers.trials import make_trial  # noqa: E402
from ddpbench.analysis.stats import normal_isf  # noqa: E402
from ddpbench.analysis.versions import compare_versions  # noqa: E402
from ddpbench.choices import Verdict  # noqa: E402
from ddpbench.collect.collector import flatten_trial  # noqa: E402
from ddpbench.formats.trial_record import FORMAT  # noqa: E402

VERSIONS = {"traceml": ["0.5.0", "0.5.1"]}
ARMS = ("native", "traceml==0.5.0", "traceml==0.5.1")


def sweep_frame(rng: np.random.Generator, pairs: int, sd_pct: float, regression_pct: float, step_ms: float,
                machine_sd_pct: float) -> pd.DataFrame:
    """One simulated versions sweep as the collector's table."""
    rows = []
    arm_log_sd = math.log(1 + sd_pct / 100) / math.sqrt(2)  # log-normal: a step time stays positive
    for repeat in range(1, pairs + 1):
        machine = math.exp(rng.normal(0, math.log(1 + machine_sd_pct / 100)))
        steps = {"native": step_ms * machine,
                 ARMS[1]: step_ms * machine * 1.10 * math.exp(rng.normal(0, arm_log_sd)),
                 ARMS[2]: step_ms * machine * 1.10 * (1 + regression_pct / 100) * math.exp(rng.normal(0, arm_log_sd))}
        order = list(ARMS) if repeat % 2 else list(reversed(ARMS))
        for position, arm in enumerate(order):
            trial = make_trial(sweep_dir="/sim", mode=arm, repeat=repeat, pair_position=position,
                               job_num=3 * repeat + position, step_ms=steps[arm],
                               train_s=steps[arm], steps=1000)  # 1000 steps of step_ms ms
            trial["config"]["versions"] = VERSIONS
            trial["arm"] = {"version": arm.split("==")[1]} if "==" in arm else None
            rows.append(flatten_trial(FORMAT.upgrade(trial), f"/sim/{repeat}-{position}/trial.json"))
    return pd.DataFrame.from_records(rows)


def measured_sd(sweep: Path) -> float:
    """The per-pair SD of per-step Δ % between the first two versions a real sweep's analysis.json records."""
    record = json.loads((sweep / "analysis.json").read_text())
    return float(record["versions"]["steps"][0]["metrics"]["step_pct"]["sd"])


def pairs_for(sd_pct: float, margin_pct: float, power: float = 0.8) -> float:
    """Pairs for a 95 % interval to clear ``margin_pct`` with ``power`` (normal approximation)."""
    return ((normal_isf(0.025) + normal_isf(1 - power)) * sd_pct / margin_pct) ** 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sims", type=int, default=500, help="simulated sweeps per cell")
    p.add_argument("--pairs", type=int, nargs="+", default=[6, 12, 24])
    p.add_argument("--sd", type=float, nargs="+", default=[5.0], help="per-pair SD of the per-step Δ %% between arms")
    p.add_argument("--from-sweep", type=Path, nargs="*", default=[], help="real versions sweeps: add their SD")
    p.add_argument("--regression", type=float, default=5.0, help="the known regression, %% of the step")
    p.add_argument("--threshold", type=float, default=1.0, help="regression_pct of the gate")
    p.add_argument("--step-ms", type=float, default=14.0, help="native step (model=small on a quiet 2-core VM)")
    p.add_argument("--machine-sd", type=float, default=5.0, help="SD of the machine factor common to a repeat, %%")
    p.add_argument("--seed", type=int, default=20261204)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    sds = [(sd, "given") for sd in args.sd] + [(measured_sd(s), f"measured: {s.name}") for s in args.from_sweep]
    rng = np.random.default_rng(args.seed)
    started, t0 = now_utc(), time.monotonic()
    lines = [f"gate_error_rates  {started}", machine_line(),
             f"{args.sims} simulated sweeps per cell; gate: regression_pct={args.threshold:g}; known regression "
             f"+{args.regression:g} % of the step", "",
             "| per-pair SD of Δ % | pairs | true Δ | regression (exit 1) | inconclusive (exit 3) | no regression (exit 0) |",
             "|---|---|---|---|---|---|"]
    for sd, source in sds:
        for pairs in args.pairs:
            for true in (0.0, args.regression):
                counts = {Verdict.over: 0, Verdict.inconclusive: 0, Verdict.within: 0}
                for _ in range(args.sims):
                    frame = sweep_frame(rng, pairs, sd, true, args.step_ms, args.machine_sd)
                    counts[compare_versions(frame, args.threshold)[0].verdict] += 1
                lines.append(f"| {sd:.1f} ({source}) | {pairs} | {'A/A' if true == 0 else f'+{true:g} %'} | "
                             + " | ".join(f"{100 * counts[v] / args.sims:.1f} %"
                                          for v in (Verdict.over, Verdict.inconclusive, Verdict.within)) + " |")
    lines += ["", "Pairs for 80 % of verdicts (normal approximation): A/A says `no regression` with about "
              "(1.96 + 0.84)² · SD² / threshold² pairs; +R % says `regression` with (1.96 + 0.84)² · SD² / (R − threshold)²:"]
    for sd, source in sds:
        lines.append(f"- SD {sd:.1f} ({source}): A/A pass {pairs_for(sd, args.threshold):.0f} pairs, "
                     f"+{args.regression:g} % caught {pairs_for(sd, args.regression - args.threshold):.0f} pairs")
    emit([*lines, "", f"{time.monotonic() - t0:.0f} s"], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
