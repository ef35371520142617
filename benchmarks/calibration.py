"""Known-answer calibration: inject known costs, check the report recovers them (per-step 5 %, start-up/teardown 10 %).

For each model size and injected size (per-step wait ms, start-up sleep s, teardown sleep s) one
paired sweep runs through the real command line::

    python -m ddpbench -m mode=native,inject repeat=1-4 model=M \\
        inject.step_ms=S inject.startup_s=U inject.teardown_s=T

and the sweep's own analysis (``analysis.json``, the same numbers as the report's
"Calibration" line) gives injected vs recovered: the mean per-step overhead (inject − native
``step_time_ms.mean``), and the mean start-up and teardown differences. Each row also carries
what else ran (the trials' ``load`` sections: 1-minute load average, CPU share of processes
outside the trials). Usage::

    python benchmarks/calibration.py [--models tiny,small] [--repeats 4] [--size 5,0,0 --size 10,6,3] [--out FILE]

The per-step cost sleeps all but its last millisecond and spins that
(``ddpbench.workload.timing.wait_until_known``), so the peers keep the cores. Noise handling: a
discarded warm-up trial first, OMP_NUM_THREADS=1 per rank, warmup steps excluded, alternating
order, an even number of pairs (each arm first equally often). The sleeps are several times the
run-to-run spread of start-up and teardown, because the tolerance is relative to the injected value.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import add_sweep_arguments, analysis, comparison, load, load_summary, machine_line, now_utc, signed, stamp, sweep, warm_up, write_out  # noqa: E402

DEFAULT_SIZES = ("5,0,0", "10,6,3", "20,0,0")
#: allowed |error| per cost, % of the injected value (per-step 5 %, start-up and teardown 10 %)
TOLERANCE_PCT = {"per-step ms": 5.0, "startup s": 10.0, "teardown s": 10.0}
NAMES = {"per-step overhead": "per-step ms", "startup difference": "startup s", "teardown difference": "teardown s"}
METRIC_OF = {"per-step overhead": "step_overhead_ms", "startup difference": "startup_diff_s",
             "teardown difference": "teardown_diff_s"}


def parse_size(text: str) -> tuple[float, float, float]:
    """``STEP_MS,STARTUP_S,TEARDOWN_S`` -> floats."""
    parts = [float(x) for x in text.split(",")]
    if len(parts) != 3 or any(p < 0 for p in parts):
        raise argparse.ArgumentTypeError(f"size {text!r}: want STEP_MS,STARTUP_S,TEARDOWN_S (>= 0)")
    return parts[0], parts[1], parts[2]


def run_size(model: str, size: tuple[float, float, float], args: argparse.Namespace, name: str) -> tuple[list[dict], dict]:
    """One calibration sweep: its rows and its summary."""
    step_ms, startup_s, teardown_s = size
    sd = sweep(["mode=native,inject", f"repeat=1-{args.repeats}", f"model={model}", *args.extra,
                f"inject.step_ms={step_ms:g}", f"inject.startup_s={startup_s:g}", f"inject.teardown_s={teardown_s:g}"],
               args.workdir, name)
    c = comparison(analysis(sd), "inject")
    base_step = c["sides"]["base_step_ms"]["mean"]
    load_text = load_summary(sd)
    rows = []
    for item in (c["calibration"] or {}).get("items", []):
        if not item["injected"]:
            continue  # nothing injected: no error to state
        m = c["metrics"][METRIC_OF[item["name"]]]
        cost = NAMES[item["name"]]
        rows.append({"model": model, "cost": cost, "injected": item["injected"], "recovered": item["recovered"],
                     "ci": (m["ci_low"], m["ci_high"]), "error_pct": item["error_pct"],
                     "within": abs(item["error_pct"]) <= TOLERANCE_PCT[cost], "base_step_ms": base_step,
                     "load": load_text})
    return rows, {"model": model, "size": list(size), "sweep_dir": str(sd), "n_pairs": c["n_pairs"], "load": load_text}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sweep_arguments(p, "pairs per size (repeat=1-N); even, so each arm runs first equally often")
    p.set_defaults(repeats=4)
    p.add_argument("--models", default="tiny,small", help="model sizes, comma-separated (default tiny,small)")
    p.add_argument("--size", action="append", type=parse_size, default=None,
                   help=f"STEP_MS,STARTUP_S,TEARDOWN_S; repeatable (default {' '.join(DEFAULT_SIZES)})")
    args = p.parse_args(argv)
    sizes = args.size or [parse_size(s) for s in DEFAULT_SIZES]
    models = [m for m in args.models.split(",") if m]
    tag = stamp()
    started, load_before = now_utc(), load()
    if not args.no_warmup:
        warm_up([f"model={models[0]}", *args.extra], args.workdir, f"bench-calibration-warmup-{tag}")
    rows, runs = [], []
    for model in models:
        for i, size in enumerate(sizes, start=1):
            size_rows, summary = run_size(model, size, args, f"bench-calibration-{model}-{i}-{tag}")
            rows += size_rows
            runs.append(summary)

    lines = [
        f"calibration  {started}",
        machine_line(),
        f"load average (1/5/15 min) before: {load_before}; after: {load()}",
        f"sweep per size: mode=native,inject repeat=1-{args.repeats} {' '.join(args.extra)}; 2 ranks, gloo, CPU, "
        "OMP_NUM_THREADS=1; tolerance: per-step 5 %, start-up and teardown 10 %",
        "",
        "| model (native step) | cost | injected | recovered (mean of pairs) | 95 % CI | error % | within | load during |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d = 3 if r["cost"].endswith("ms") else 2
        lines.append(f"| {r['model']} ({r['base_step_ms']:.2f} ms) | {r['cost']} | {r['injected']:g} | "
                     f"{signed(r['recovered'], d)} | [{signed(r['ci'][0], d)}, {signed(r['ci'][1], d)}] | "
                     f"{signed(r['error_pct'], 1)} | {'yes' if r['within'] else 'NO'} | {r['load']} |")
    ok = all(r["within"] for r in rows)
    lines += ["", f"all injected costs recovered within tolerance: {'yes' if ok else 'NO'}"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(args.out, text, {"benchmark": "calibration", "started": started, "machine": machine_line(),
                               "load_before": load_before, "load_after": load(), "repeats": args.repeats,
                               "models": models, "overrides": args.extra, "runs": runs, "rows": rows, "all_within": ok})
    return 0


if __name__ == "__main__":
    sys.exit(main())
