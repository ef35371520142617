"""Known-answer calibration: inject known costs, check the report recovers them within 10 %.

For each injected size (per-step busy-wait ms, start-up sleep s, teardown sleep s) one paired
sweep runs through the real command line::

    python -m ddpbench -m mode=native,inject repeat=1-5 model=small \\
        inject.step_ms=S inject.startup_s=U inject.teardown_s=T

and the sweep's own analysis (``analysis.json``, the same numbers as the report's
"Calibration" line) gives injected vs recovered: the mean per-step overhead (inject − native
``step_time_ms.mean``), and the mean start-up and teardown differences. Usage::

    python benchmarks/calibration.py [--repeats 5] [--size 5,6,3 --size 20,12,6] [--model small] [--out FILE]

Noise handling: a discarded warm-up trial first (the first trial after idle starts seconds
slower), OMP_NUM_THREADS=1 per rank (``cluster.threads_per_rank``), warmup steps excluded,
alternating order (the paired sweeper). The sleeps are chosen several times the run-to-run
spread of start-up (~0.5-1 s on a loaded 2-core machine) and teardown (~0.1-0.3 s), because the
10 % tolerance is absolute: a 1 s injected start-up would have to be recovered to ±0.1 s.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import add_sweep_arguments, analysis, comparison, load, machine_line, now_utc, signed, stamp, sweep, warm_up, write_out  # noqa: E402

DEFAULT_SIZES = ("5,6,3", "20,12,6")
NAMES = {"per-step overhead": "per-step ms", "startup difference": "startup s", "teardown difference": "teardown s"}


def parse_size(text: str) -> tuple[float, float, float]:
    """``STEP_MS,STARTUP_S,TEARDOWN_S`` -> floats."""
    parts = [float(x) for x in text.split(",")]
    if len(parts) != 3 or any(p < 0 for p in parts):
        raise argparse.ArgumentTypeError(f"size {text!r}: want STEP_MS,STARTUP_S,TEARDOWN_S (>= 0)")
    return parts[0], parts[1], parts[2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sweep_arguments(p, "pairs per size (repeat=1-N)")
    p.add_argument("--size", action="append", type=parse_size, default=None,
                   help=f"STEP_MS,STARTUP_S,TEARDOWN_S; repeatable (default {' and '.join(DEFAULT_SIZES)})")
    args = p.parse_args(argv)
    sizes = args.size or [parse_size(s) for s in DEFAULT_SIZES]
    common = [f"model={args.model}", *args.extra]
    tag = stamp()
    started, load_before = now_utc(), load()
    if not args.no_warmup:
        warm_up(common, args.workdir, f"bench-calibration-warmup-{tag}")
    rows, data_sizes, lines_report = [], [], []
    for i, (step_ms, startup_s, teardown_s) in enumerate(sizes, start=1):
        sd = sweep(["mode=native,inject", f"repeat=1-{args.repeats}", *common, f"inject.step_ms={step_ms:g}",
                    f"inject.startup_s={startup_s:g}", f"inject.teardown_s={teardown_s:g}"],
                   args.workdir, f"bench-calibration-{i}-{tag}")
        c = comparison(analysis(sd), "inject")
        report = (sd / "report.md").read_text()
        cal_lines = [ln for ln in report.splitlines() if ln.startswith("Calibration (")]
        lines_report += cal_lines
        metric_of = {"per-step overhead": "step_overhead_ms", "startup difference": "startup_diff_s",
                     "teardown difference": "teardown_diff_s"}
        base_step = c["sides"]["base_step_ms"]["mean"]
        for item in (c["calibration"] or {}).get("items", []):
            m = c["metrics"][metric_of[item["name"]]]
            rows.append({"size": i, "cost": NAMES[item["name"]], "injected": item["injected"],
                         "recovered": item["recovered"], "ci": (m["ci_low"], m["ci_high"]),
                         "error_pct": item["error_pct"], "within": item["within_tolerance"],
                         "base_step_ms": base_step})
        data_sizes.append({"size": [step_ms, startup_s, teardown_s], "sweep_dir": str(sd), "n_pairs": c["n_pairs"],
                           "all_within": c["calibration"]["all_within"] if c["calibration"] else None,
                           "report_line": cal_lines[0] if cal_lines else None})


    lines = [
        f"calibration  {started}",
        machine_line(),
        f"load average (1/5/15 min) before: {load_before}; after: {load()}",
        f"sweep per size: mode=native,inject repeat=1-{args.repeats} {' '.join(common)}; "
        "2 ranks, gloo, CPU, OMP_NUM_THREADS=1; tolerance 10 %",
        "",
        "| size | cost | injected | recovered (mean of pairs) | 95 % CI | error % | within 10 % |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d = 3 if r["cost"].endswith("ms") else 2
        within = "yes" if r["within"] else ("no" if r["within"] is False else "n/a")
        lines.append(f"| {r['size']} (native step {r['base_step_ms']:.2f} ms) | {r['cost']} | {r['injected']:g} | "
                     f"{signed(r['recovered'], d)} | [{signed(r['ci'][0], d)}, {signed(r['ci'][1], d)}] | "
                     f"{signed(r['error_pct'], 1)} | {within} |")
    ok = all(s["all_within"] for s in data_sizes)
    lines += ["", f"all injected costs recovered within 10 %: {'yes' if ok else 'NO'}", "",
              "report lines:", *[f"- {ln}" for ln in lines_report]]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(args.out, text, {"benchmark": "calibration", "started": started, "machine": machine_line(),
                               "load_before": load_before, "load_after": load(), "repeats": args.repeats,
                               "overrides": common, "sizes": data_sizes, "rows": rows, "all_within": ok})
    return 0


if __name__ == "__main__":
    sys.exit(main())
