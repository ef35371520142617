"""Within-trial switching (``switching=blocks``): its noise floor, its calibration, carry-over, and TraceML.

Runs real sweeps through the command line and reads their records:

1. **Calibration and floor**: ``-m mode=native,inject inject.step_ms=<5,10,20> repeat=1-N switching=blocks``.
   Per injected wait, the within-trial figure of ``inject`` against the injected wait and against the
   between-trial figure of the same trials (the on-blocks against native's same blocks); the ``native`` trials'
   no-op switch gives the method's own floor (half-width, ms and % of the step).
2. **Floor against timed steps and block length**: the native trials' saved step times (nothing is switched
   there, so any block schedule is a valid no-op) re-blocked offline at several block lengths and truncated to
   fewer steps: the no-op half-width, pooled over the trials, as a function of both.
3. **Carry-over**: in the inject trials (20 ms), do the off-blocks that follow an on-block run slower than
   the off-blocks that follow an off-block (ABBA has both)? Per step position in the block (lag), the mean
   difference: how long a wash-out is needed.
4. **TraceML** (``--traceml``): ``-m mode=native,traceml,traceml_manual switching=blocks``: within-trial against
   between-trial per-step cost.

Usage::

    python benchmarks/switching_floor.py [--repeats 3] [--model small] [--steps 1000] [--inject 5,10,20] [--traceml]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import add_sweep_arguments, analysis, load, load_summary, machine_line, now_utc, signed, stamp, sweep, trials, warm_up, write_out  # noqa: E402

from ddpbench.analysis.switching import TrialSwitch, combine  # noqa: E402
from ddpbench.formats.switching import block_side, block_summaries, trial_estimate  # noqa: E402

BLOCKS = (5, 10, 20, 50)
GOAL_PCT = 1.0


def slowest_steps_ms(trial: dict[str, Any]) -> list[float]:
    """Per timed step, the slowest rank's time (ms), from the trial's rank records."""
    metrics = Path(trial["attempt"]["dir"]) / "metrics"
    ranks = [json.loads(p.read_text()).get("step_times_ms") or [] for p in sorted(metrics.glob("rank-*.json"))]
    return [max(steps) for steps in zip(*ranks)] if ranks else []


def reblocked(steps_ms: list[float], block: int, washout: int, first: str) -> TrialSwitch | None:
    """A no-op switch's estimate of ``steps_ms`` blocked at ``block`` steps."""
    blocks = [{**b, "mean_ms": b["mean_s"]} for b in block_summaries(steps_ms, block, min(washout, block - 1), first)]
    e = trial_estimate(blocks, block)
    return TrialSwitch(e["overhead_ms"], e["se_ms"], e["off_step_ms"], e["quads"]) if e else None


def floor_table(native: list[dict[str, Any]], washout: int) -> tuple[list[str], dict[str, Any]]:
    """No-op half-width (ms, % of the step) by block length and by timed steps used."""
    steps = [slowest_steps_ms(t) for t in native]
    n_max = min(len(s) for s in steps)
    lengths = sorted({n_max // 4, n_max // 2, n_max})
    lines = ["| block steps | " + " | ".join(f"{n} steps x {len(steps)} trials" for n in lengths) + " |",
             "|---|" + "---|" * len(lengths)]
    data: dict[str, Any] = {}
    for block in BLOCKS:
        cells = []
        for n in lengths:
            firsts = ["on" if i % 2 else "off" for i in range(len(steps))]
            est = combine([t for t in (reblocked(s[:n], block, washout, f) for s, f in zip(steps, firsts)) if t])
            if est is None or not math.isfinite(est.half_width_ms):
                cells.append("n/a")
                continue
            pct = 100.0 * est.half_width_ms / est.off_step_ms
            cells.append(f"±{est.half_width_ms:.3f} ms (±{pct:.2f} %, {est.quads} quads)")
            data[f"{block}/{n}"] = {"half_width_ms": est.half_width_ms, "half_width_pct": pct, "quads": est.quads,
                                    "estimate_ms": est.overhead_ms}
        lines.append(f"| {block} | " + " | ".join(cells) + " |")
    return lines, data


def carry_over(inject: list[dict[str, Any]]) -> tuple[list[str], dict[int, dict[str, float]]]:
    """Per lag (step position in the block): off-block after an on-block minus off-block after an off-block, ms."""
    by_lag: dict[int, list[float]] = {}
    for trial in inject:
        sw = trial["switching"]
        steps, block = slowest_steps_ms(trial), int(sw["block_steps"])
        n_blocks = len(steps) // block
        for b in range(1, n_blocks - 1):
            if block_side(b, sw["first_side"]) != "off" or block_side(b + 1, sw["first_side"]) != "off":
                continue
            if block_side(b - 1, sw["first_side"]) != "on":
                continue
            after_on, after_off = steps[b * block:(b + 1) * block], steps[(b + 1) * block:(b + 2) * block]
            for lag, (x, y) in enumerate(zip(after_on, after_off)):
                by_lag.setdefault(lag + 1, []).append(x - y)
    lines = ["| lag (step in block) | off after on − off after off, ms | n |", "|---|---|---|"]
    data = {}
    for lag, diffs in sorted(by_lag.items()):
        mean = statistics.fmean(diffs)
        se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan
        lines.append(f"| {lag} | {signed(mean, 3)} ± {2 * se:.3f} | {len(diffs)} |")
        data[lag] = {"mean_ms": mean, "se_ms": se, "n": len(diffs)}
    return lines, data


def within_between(data: dict[str, Any], mode: str) -> dict[str, Any] | None:
    found = [c for c in data["comparisons"] if c["mode"] == mode and c.get("switched")]
    return found[0] if found else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sweep_arguments(p, "pairs per sweep (repeat=1-N)")
    p.set_defaults(repeats=3)
    p.add_argument("--steps", type=int, default=1000, help="timed steps per trial")
    p.add_argument("--block-steps", type=int, default=10, help="switching.block_steps of the sweeps")
    p.add_argument("--washout-steps", type=int, default=2, help="switching.washout_steps of the sweeps")
    p.add_argument("--inject", default="5,10,20", help="injected waits to calibrate against, ms")
    p.add_argument("--traceml", action="store_true", help="also sweep native,traceml,traceml_manual")
    args = p.parse_args(argv)
    common = [f"model={args.model}", f"stop.steps={args.steps}", "switching=blocks",
              f"switching.block_steps={args.block_steps}", f"switching.washout_steps={args.washout_steps}", *args.extra]
    tag, started, load_before = stamp(), now_utc(), load()
    if not args.no_warmup:
        warm_up([f"model={args.model}"], args.workdir, f"bench-switch-warmup-{tag}")
    lines = [f"switching_floor  {started}", machine_line(), f"load average (1/5/15 min) before: {load_before}", ""]
    out: dict[str, Any] = {"benchmark": "switching_floor", "started": started, "machine": machine_line(),
                           "overrides": common, "repeats": args.repeats}
    sd = sweep(["mode=native,inject", f"inject.step_ms={args.inject}", "inject.startup_s=0", "inject.teardown_s=0",
                f"repeat=1-{args.repeats}", *common], args.workdir, f"bench-switch-{tag}")
    data, all_trials = analysis(sd), [t for t in trials(sd) if t["status"] == "ok"]
    lines += [f"## 1. Calibration: injected wait switched ({load_summary(sd)})", "",
              "| injected ms | within-trial ms [95 %] | error | between-trial ms, on-blocks [95 %] | no-op floor ms [95 %] "
              "| floor half-width % of step |", "|---|---|---|---|---|---|"]
    out["calibration"] = []
    for c in sorted((c for c in data["comparisons"] if c.get("switched")),
                    key=lambda c: float(c["condition"].get("inject.step_ms", 0))):
        w, f = c["switched"], c["switched_base"]
        injected = float(c["condition"].get("inject.step_ms", math.nan))
        floor_pct = 100.0 * (f["ci_high_ms"] - f["ci_low_ms"]) / 2 / f["off_step_ms"]
        lines.append(f"| {injected:g} | {signed(w['overhead_ms'], 3)} [{signed(w['ci_low_ms'], 3)}, {signed(w['ci_high_ms'], 3)}] "
                     f"| {signed(100 * (w['overhead_ms'] - injected) / injected, 1)} % | {signed(w['between_ms'], 3)} "
                     f"[{signed(w['between_low_ms'], 3)}, {signed(w['between_high_ms'], 3)}] | {signed(f['overhead_ms'], 3)} "
                     f"[{signed(f['ci_low_ms'], 3)}, {signed(f['ci_high_ms'], 3)}] | ±{floor_pct:.2f} |")
        out["calibration"].append({"injected_ms": injected, "within": w, "floor": f})
    native = [t for t in all_trials if t["mode"] == "native"]
    table, out["floor"] = floor_table(native, args.washout_steps)
    lines += ["", f"## 2. No-op floor (native trials re-blocked offline, wash-out {args.washout_steps}; goal ±{GOAL_PCT:g} %)",
              "", *table]
    inject20 = [t for t in all_trials if t["mode"] == "inject" and t["switching"]["what"] == "inject"
                and float(t["config"]["inject"]["step_ms"]) == max(float(x) for x in args.inject.split(","))]
    table, out["carry_over"] = carry_over(inject20)
    lines += ["", "## 3. Carry-over (largest injected wait): off-block after an on-block vs after an off-block", "", *table]
    if args.traceml:
        sd2 = sweep(["mode=native,traceml,traceml_manual", f"repeat=1-{args.repeats}", *common], args.workdir,
                    f"bench-switch-traceml-{tag}")
        data2 = analysis(sd2)
        lines += ["", f"## 4. TraceML ({load_summary(sd2)})", "",
                  "| mode | within-trial ms [95 %] (%) | between-trial on-blocks ms [95 %] | between-trial whole trials ms [95 %] |",
                  "|---|---|---|---|"]
        out["traceml"] = {}
        for mode in ("traceml", "traceml_manual"):
            c = within_between(data2, mode)
            if c is None:
                continue
            w, m = c["switched"], c["metrics"]["step_overhead_ms"]
            lines.append(f"| {mode} | {signed(w['overhead_ms'], 3)} [{signed(w['ci_low_ms'], 3)}, {signed(w['ci_high_ms'], 3)}] "
                         f"({signed(w['overhead_pct'], 2)} %) | {signed(w['between_ms'], 3)} [{signed(w['between_low_ms'], 3)}, "
                         f"{signed(w['between_high_ms'], 3)}] | {signed(m['mean'], 3)} [{signed(m['ci_low'], 3)}, {signed(m['ci_high'], 3)}] |")
            out["traceml"][mode] = {"within": w, "between_whole": m}
    lines += ["", f"load average after: {load()}", f"sweep dirs: {sd}"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(args.out, text, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
