"""Collector speed: 10,000 synthetic trial.json files collected, against a bare json.load loop.

    python benchmarks/collector_scale.py [--trials 10000] [--repeats 3] [--out FILE]

Goal: 10,000 trials in <= 3 s on a 2-core machine. The files are written once
into a temporary directory laid out like Hydra multiruns (<sweep>/<job>/trial.json, with a
.hydra/ folder per job); each timing is the best of ``--repeats`` runs with a warm page cache.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from trial_factory import make_trial  # noqa: E402

from ddpbench.collect import collect_trials  # noqa: E402
from ddpbench.trial.environment import cpu_model  # noqa: E402




def generate(root: Path, n: int) -> None:
    """Write ``n`` trials in sweeps of 100 jobs, alternating native/traceml."""
    for i in range(n):
        sweep = root / f"sweep{i // 100:03d}"
        job = i % 100
        mode = "native" if job % 2 == 0 else "traceml"
        trial = make_trial(sweep_dir=str(sweep), mode=mode, repeat=job // 2 + 1,
                           pair_position=(job + job // 2) % 2, job_num=job,
                           train_s=100.0 + (i % 7) * 0.1)
        d = sweep / str(job)
        (d / ".hydra").mkdir(parents=True, exist_ok=True)
        (d / ".hydra" / "config.yaml").write_text("mode: x\n")
        (d / "trial.json").write_text(json.dumps(trial, indent=2))


def baseline(root: Path) -> int:
    count = 0
    for path in root.rglob("trial.json"):
        with open(path, encoding="utf-8") as handle:
            json.load(handle)
        count += 1
    return count


def best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="also write the table to FILE")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ddpbench-collect-bench-") as tmp:
        root = Path(tmp)
        generate(root, args.trials)
        size = sum(p.stat().st_size for p in root.rglob("trial.json")) / args.trials
        n_base = baseline(root)
        result = collect_trials([root])
        assert n_base == args.trials == len(result.frame), (n_base, len(result.frame), result.skipped[:3])
        t_base = best_of(lambda: baseline(root), args.repeats)
        t_coll = best_of(lambda: collect_trials([root]), args.repeats)
    lines = [
        f"collector_scale  {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}",
        f"trials: {args.trials} (mean file {size / 1024:.1f} KiB), best of {args.repeats}",
        "",
        "| method | seconds | trials/s | goal |",
        "|---|---|---|---|",
        f"| json.load loop (rglob) | {t_base:.2f} | {args.trials / t_base:,.0f} | |",
        f"| collect_trials -> DataFrame | {t_coll:.2f} | {args.trials / t_coll:,.0f} | <= 3 s: {'met' if t_coll <= 3 * args.trials / 10_000 else 'MISSED'} |",
        f"| ratio collect / json.load | {t_coll / t_base:.2f} | | |",
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
