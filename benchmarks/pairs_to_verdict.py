"""Pairs ``repeat=auto`` needs for a verdict on a known injected per-step cost, through the real command line.

Runs ``--sweeps`` sweeps of::

    python -m ddpbench -m mode=native,inject repeat=auto model=small inject.step_ms=X budget_pct=2

where X is ``--fraction`` (default 0.10: +10 %) of the native step measured by a warm-up trial
first, and prints per sweep the pairs run, why the sweep stopped (``stopping.json``), the verdict
and the interval of the decided metric; then the mean and the largest number of pairs. Goal: a
decisive "over" verdict on +10 % against the 2 % budget within 6 pairs. Usage::

    python benchmarks/pairs_to_verdict.py [--sweeps 3] [--fraction 0.10] [--budget 2] [--model small] [--out FILE]

The injected wait sleeps and spins the last 0.2 ms (``ddpbench.workload.timing``); the sweep's
own analysis says what the injection really cost (the ``recovered`` column).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import analysis, comparison, ddpbench, load, load_summary, machine_line, now_utc, stamp, sweep, write_out  # noqa: E402


def native_step_ms(common: list[str], cwd: Path, name: str) -> float:
    """The native mean step (ms) of one discarded warm-up trial (it also warms the page cache)."""
    print(f"warm-up trial (sizes the injection): {name}", file=sys.stderr, flush=True)
    ddpbench(["mode=native", *common, f"sweep_name={name}"], cwd)
    record = json.loads((cwd / "outputs" / "runs" / name / "trial.json").read_text())
    return float(record["step_time_ms"]["mean"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=3, help="repeat=auto sweeps to run")
    p.add_argument("--fraction", type=float, default=0.10, help="injected per-step cost as a fraction of the native step")
    p.add_argument("--budget", type=float, default=2.0, help="budget_pct of the sweeps")
    p.add_argument("--model", default="small")
    p.add_argument("--extra", nargs="*", default=[], help="more overrides for every sweep")
    p.add_argument("--workdir", type=Path, default=Path.cwd())
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    common = [f"model={args.model}", *args.extra]
    tag = stamp()
    started, load_before = now_utc(), load()
    step_ms = native_step_ms(common, args.workdir, f"bench-ptv-warmup-{tag}")
    inject_ms = round(step_ms * args.fraction, 3)
    lines = [f"pairs_to_verdict  {started}", machine_line(), f"load average (1/5/15 min) before: {load_before}",
             f"native step {step_ms:.2f} ms (warm-up trial) -> inject.step_ms={inject_ms} "
             f"(+{100 * args.fraction:.0f} %), budget {args.budget:g} %", "",
             "| sweep | pairs | stopped because | decision | per-step overhead % (the look's interval) | recovered ms per step | load |",
             "|---|---|---|---|---|---|---|"]
    runs = []
    for i in range(args.sweeps):
        name = f"bench-ptv-{tag}-{i + 1}"
        sd = sweep(["mode=native,inject", "repeat=auto", *common, f"inject.step_ms={inject_ms}", "inject.startup_s=0",
                    "inject.teardown_s=0", f"budget_pct={args.budget}"], args.workdir, name)
        stopping = json.loads((sd / "stopping.json").read_text())
        cond = stopping["conditions"][0]
        c = comparison(analysis(sd), "inject")
        d, ms = cond["comparisons"]["inject"], c["metrics"]["step_overhead_ms"]
        verdict = cond["reason"]
        lines.append(f"| {i + 1} | {cond['pairs']} | {cond['reason']} | {d['message']} | {d['mean']:+.2f} "
                     f"[{d['ci_low']:+.2f}, {d['ci_high']:+.2f}] at {100 * d['look_confidence']:.1f} % | "
                     f"{ms['mean']:.3f} | {load_summary(sd)} |")
        runs.append({"sweep_dir": str(sd), "pairs": cond["pairs"], "reason": cond["reason"], "verdict": verdict,
                     "decision": d, "step_overhead_ms": ms})
    pairs = [r["pairs"] for r in runs]
    lines += ["", f"pairs to a verdict: mean {sum(pairs) / len(pairs):.1f}, max {max(pairs)} "
              f"(goal <= 6: {'met' if max(pairs) <= 6 else 'MISSED'})", f"load average after: {load()}"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(args.out, text, {"benchmark": "pairs_to_verdict", "started": started, "machine": machine_line(),
                               "inject_step_ms": inject_ms, "native_step_ms": step_ms, "budget_pct": args.budget,
                               "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
