"""A/A noise floor: native against itself; the smallest overhead this machine and sweep can resolve.

Runs one paired sweep through the real command line::

    python -m ddpbench -m mode=native,native_aa repeat=1-5 model=small

(``native_aa`` is native under another name) and prints, from the sweep's ``analysis.json``, the
95 % interval of the throughput overhead and of the per-step overhead (and wall overhead) with
their half-widths; the report labels the throughput half-width as the noise floor. Goal on a
2-core machine: half-width <= 2 %. Usage::

    python benchmarks/noise_floor.py [--repeats 5] [--model small] [--extra stop.steps=400] [--out FILE]
    python benchmarks/noise_floor.py --affinity none,auto --rounds 2 --repeats 4   # pinning or not

``--affinity`` runs one sweep per ``cluster.cpu_affinity`` setting and round, alternating the
settings (A B, then B A, ...), and compares their half-widths: what decided the default.

Noise handling: a discarded warm-up trial first, OMP_NUM_THREADS=1 per rank
(``cluster.threads_per_rank``), warmup steps excluded, alternating order (the paired sweeper).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import add_sweep_arguments, analysis, comparison, load, load_summary, machine_line, now_utc, signed, stamp, sweep, warm_up, write_out  # noqa: E402

GOAL_PCT = 2.0
ROWS = (("throughput overhead", "throughput_overhead_pct", "%"), ("per-step overhead", "step_overhead_pct", "%"),
        ("per-step overhead", "step_overhead_ms", "ms"), ("wall overhead", "wall_overhead_pct", "%"),
        ("startup difference", "startup_diff_s", "s"))


def one_sweep(args: argparse.Namespace, common: list[str], name: str) -> tuple[list[str], dict]:
    """One A/A sweep: its table lines and its figures."""
    sd = sweep(["mode=native,native_aa", f"repeat=1-{args.repeats}", *common], args.workdir, name)
    data = analysis(sd)
    c = comparison(data, "native_aa")
    report = (sd / "report.md").read_text()
    floor_lines = [ln for ln in report.splitlines() if ln.startswith("Noise floor (")]
    lines = [
        f"sweep: mode=native,native_aa repeat=1-{args.repeats} {' '.join(common)}; 2 ranks, gloo, CPU, "
        f"OMP_NUM_THREADS=1; {c['n_pairs']} pairs; native step {c['sides']['base_step_ms']['mean']:.2f} ms, "
        f"{c['sides']['base_steps_per_s']['mean']:.1f} steps/s; {load_summary(sd)}",
        "",
        "| metric | mean | 95 % CI | half-width | MDE (80 %) | goal |",
        "|---|---|---|---|---|---|",
    ]
    out_rows = {}
    for label, key, unit in ROWS:
        m = c["metrics"][key]
        hw = m.get("half_width")
        d = 3 if unit == "ms" else 2
        goal = ""
        if unit == "%" and key in ("throughput_overhead_pct", "step_overhead_pct"):
            goal = f"<= {GOAL_PCT:g} %: " + ("met" if hw is not None and hw <= GOAL_PCT else "MISSED")
        lines.append(f"| {label} ({unit}) | {signed(m['mean'], d)} | [{signed(m['ci_low'], d)}, {signed(m['ci_high'], d)}] | "
                     f"{signed(hw, d).lstrip('+')} | {signed(m.get('mde'), d).lstrip('+')} | {goal} |")
        out_rows[key] = {"mean": m["mean"], "ci": [m["ci_low"], m["ci_high"]], "half_width": hw, "mde": m.get("mde")}
    stab = {s["mode"]: s for s in c["stability"]}
    lines += ["", "stability: " + "; ".join(
        f"{mode} step CV within trials {s['step_time_cv_within_pct']:.1f} %, throughput CV across trials "
        f"{s['throughput_cv_pct']:.2f} %" for mode, s in stab.items()), "",
        "report line:", *[f"- {ln}" for ln in floor_lines], f"sweep dir: {sd}", ""]
    return lines, {"sweep_dir": str(sd), "n_pairs": c["n_pairs"], "metrics": out_rows, "load": load_summary(sd),
                   "noise_floor_pct": data["noise_floors"], "report_line": floor_lines[0] if floor_lines else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sweep_arguments(p, "pairs (repeat=1-N)")
    p.add_argument("--affinity", default=None,
                   help="cluster.cpu_affinity settings to compare, comma-separated (e.g. none,auto); one sweep each per round")
    p.add_argument("--rounds", type=int, default=1, help="with --affinity: rounds, the settings' order reversed each round")
    args = p.parse_args(argv)
    common = [f"model={args.model}", *args.extra]
    settings = args.affinity.split(",") if args.affinity else [None]
    tag = stamp()
    started, load_before = now_utc(), load()
    if not args.no_warmup:
        warm_up(common, args.workdir, f"bench-noise-warmup-{tag}")
    lines = [f"noise_floor  {started}", machine_line(), f"load average (1/5/15 min) before: {load_before}", ""]
    runs = []
    for rnd in range(args.rounds):
        for setting in (settings if rnd % 2 == 0 else settings[::-1]):
            extra = [f"cluster.cpu_affinity={setting}"] if setting else []
            name = f"bench-noise-{tag}" + (f"-{setting}-{rnd + 1}" if setting else "")
            if setting:
                lines.append(f"## cluster.cpu_affinity={setting}, round {rnd + 1}")
            sweep_lines, figures = one_sweep(args, [*common, *extra], name)
            lines += sweep_lines
            runs.append({"affinity": setting, "round": rnd + 1, **figures})
    if args.affinity:
        lines += ["| cluster.cpu_affinity | sweeps | mean half-width, throughput % | mean half-width, per-step ms |", "|---|---|---|---|"]
        for setting in settings:
            mine = [r["metrics"] for r in runs if r["affinity"] == setting]
            hw_pct = sum(m["throughput_overhead_pct"]["half_width"] for m in mine) / len(mine)
            hw_ms = sum(m["step_overhead_ms"]["half_width"] for m in mine) / len(mine)
            lines.append(f"| {setting} | {len(mine)} | {hw_pct:.2f} | {hw_ms:.3f} |")
    lines.append(f"load average after: {load()}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(args.out, text, {"benchmark": "noise_floor", "started": started, "machine": machine_line(),
                               "load_before": load_before, "load_after": load(), "repeats": args.repeats,
                               "overrides": common, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
