"""Known-answer check of the trial footprint: an injected side process's CPU cores and memory recovered within 10 %.

For each injected size (fraction of one core, MiB held) one sweep of real trials runs through the command line::

    python -m ddpbench -m mode=inject repeat=1-N model=M stop=duration stop.duration_sec=S \\
        inject.side_cpu=C inject.side_mb=MB inject.step_ms=0 inject.startup_s=0 inject.teardown_s=0

Local rank 0 starts the side process (``ddpbench.workload.side_load``), which spins at C of one core and holds MB MiB
until its rank ends, then writes what it got as it sees itself (``metrics/side-load-node0.json``: its CPU seconds
over its life since the kernel started it, its resident set before and after allocating). Each trial's
``footprint.kinds["ddpbench.workload.side_load"]`` must recover:

- its CPU cores used (CPU s per s alive) within 10 % of what it got (on a busy machine it may get less than C: that
  column is shown too, with the error against C);
- its peak RSS within 10 % of MB MiB plus its interpreter's own resident set before allocating.

Also printed: the rank's timed-steps CPU ms per step and the trial's exact total CPU cores. Usage::

    python benchmarks/footprint_check.py [--size 0.5,200 --size 0.25,400] [--repeats 3] [--seconds 60] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load, load_summary, machine_line, now_utc, signed, stamp, sweep, trials, write_out  # noqa: E402

DEFAULT_SIZES = ("0.5,200", "0.25,400")
#: allowed |error| of each recovered figure, % of the known one
TOLERANCE_PCT = 10.0
SIDE_KIND = "ddpbench.workload.side_load"
MIB = 2**20


def parse_size(text: str) -> tuple[float, float]:
    """``CORES,MIB`` -> floats."""
    parts = [float(x) for x in text.split(",")]
    if len(parts) != 2 or not 0 <= parts[0] <= 1 or parts[1] < 0:
        raise argparse.ArgumentTypeError(f"size {text!r}: want CORES,MIB (cores 0 to 1, MiB >= 0)")
    return parts[0], parts[1]


def error_pct(recovered: float | None, known: float) -> float | None:
    """The error of ``recovered`` in % of ``known`` (None when either is unknown or zero)."""
    return None if recovered is None or not known else 100.0 * (recovered - known) / known


def trial_row(trial: dict[str, Any], cores: float, mib: float) -> dict[str, Any]:
    """One trial's injected, self-measured and recovered figures."""
    own = json.loads((Path(trial["attempt"]["dir"]) / "metrics" / "side-load-node0.json").read_text())
    footprint = trial.get("footprint") or {}
    side = (footprint.get("kinds") or {}).get(SIDE_KIND) or {}
    rank = (footprint.get("ranks") or [{}])[0]
    held = mib * MIB + own["baseline_rss_bytes"]
    row = {
        "repeat": trial["repeat"], "status": trial["status"], "injected_cores": cores, "got_cores": own["cores"],
        "recovered_cores": side.get("cores"), "recovered_cpu_s": side.get("cpu_s"), "got_cpu_s": own["cpu_s"],
        "injected_mib": mib, "known_mib": held / MIB,
        "recovered_mib": side["peak_rss_bytes"] / MIB if side.get("peak_rss_bytes") is not None else None,
        "rank_cpu_ms_per_step": rank.get("timed_cpu_ms_per_step"),
        "total_cores": (footprint.get("total") or {}).get("cores"),
    }
    row["cores_error_pct"] = error_pct(row["recovered_cores"], own["cores"])
    row["cores_vs_injected_pct"] = error_pct(row["recovered_cores"], cores)
    row["mib_error_pct"] = error_pct(row["recovered_mib"], row["known_mib"])
    row["within"] = all(e is not None and abs(e) <= TOLERANCE_PCT for e in (row["cores_error_pct"], row["mib_error_pct"]))
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", action="append", type=parse_size, default=None,
                   help=f"CORES,MIB of the side process; repeatable (default {' '.join(DEFAULT_SIZES)})")
    p.add_argument("--repeats", type=int, default=3, help="trials per size (repeat=1-N)")
    p.add_argument("--seconds", type=float, default=60.0, help="timed training per trial (stop=duration), s")
    p.add_argument("--model", default="small", help="model config (CPU default: small)")
    p.add_argument("--ranks", type=int, default=2, help="ranks per trial (cluster.nproc_per_node)")
    p.add_argument("--extra", nargs="*", default=[], help="more Hydra overrides")
    p.add_argument("--workdir", type=Path, default=Path.cwd(), help="where outputs/ goes (default: cwd)")
    p.add_argument("--out", type=Path, default=None, help="also write the table (.md) or the data (.json)")
    args = p.parse_args(argv)
    sizes = args.size or [parse_size(s) for s in DEFAULT_SIZES]
    tag, started, load_before = stamp(), now_utc(), load()
    rows, runs = [], []
    for i, (cores, mib) in enumerate(sizes, start=1):
        sd = sweep(["mode=inject", f"repeat=1-{args.repeats}", f"model={args.model}",
                    f"cluster.nproc_per_node={args.ranks}", "stop=duration", f"stop.duration_sec={args.seconds:g}",
                    f"inject.side_cpu={cores:g}", f"inject.side_mb={mib:g}", "inject.step_ms=0", "inject.startup_s=0",
                    "inject.teardown_s=0", *args.extra], args.workdir, f"bench-footprint-{i}-{tag}")
        load_text = load_summary(sd)
        rows += [{**trial_row(t, cores, mib), "load": load_text} for t in trials(sd)]
        runs.append({"cores": cores, "mib": mib, "sweep_dir": str(sd), "load": load_text})

    lines = [
        f"footprint check  {started}",
        machine_line(),
        f"load average (1/5/15 min) before: {load_before}; after: {load()}",
        f"per size: mode=inject repeat=1-{args.repeats} model={args.model} {args.ranks} ranks, "
        f"{args.seconds:g} s timed; tolerance {TOLERANCE_PCT:g} %",
        "",
        "| injected cores | got (its own) | recovered | error % | vs injected % | injected MiB | known MiB "
        "(+ interpreter) | recovered MiB | error % | rank CPU ms/step | trial cores | within | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['injected_cores']:g} | {r['got_cores']:.3f} | {r['recovered_cores'] or float('nan'):.3f} | "
            f"{signed(r['cores_error_pct'], 1)} | {signed(r['cores_vs_injected_pct'], 1)} | {r['injected_mib']:g} | "
            f"{r['known_mib']:.1f} | {r['recovered_mib'] or float('nan'):.1f} | {signed(r['mib_error_pct'], 1)} | "
            f"{r['rank_cpu_ms_per_step'] or float('nan'):.3f} | {r['total_cores'] or float('nan'):.2f} | "
            f"{'yes' if r['within'] else 'NO'} | {r['load']} |")
    ok = bool(rows) and all(r["within"] for r in rows)
    lines += ["", f"every side process recovered within {TOLERANCE_PCT:g} %: {'yes' if ok else 'NO'}"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(args.out, text, {"benchmark": "footprint_check", "started": started, "machine": machine_line(),
                               "load_before": load_before, "load_after": load(), "runs": runs, "rows": rows,
                               "all_within": ok})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
