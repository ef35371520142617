"""The machine's own A/A floor: fixed compute in fresh processes, no DDP, no harness, no tool.

A "trial" starts ``--ranks`` processes at once (one thread each, like ddpbench's ranks with
``cluster.threads_per_rank=1``); each runs the same fixed number of ``64x512 @ 512x512`` matmuls
(the shape of ``model=small``'s first layer) and reports its time; the trial's time is the slowest
process's (ranks in lockstep wait for the slowest). Trials run in A/A pairs, alternating which
side goes first, exactly like a ddpbench A/A sweep, and the script prints the 95 % paired-t
half-width of the per-pair difference (%) over the first 5 and over all pairs.

Nothing here is ddpbench's: the figure is the smallest half-width ANY paired harness can reach on
this machine with trials this long, and the yardstick for ``benchmarks/noise_floor.py``. Usage::

    python benchmarks/machine_floor.py [--pairs 10] [--seconds 5] [--ranks 2] [--pin] [--out FILE]

``--pin`` pins process i to CPU i (``os.sched_setaffinity``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load, machine_line, now_utc, write_out  # noqa: E402


def worker(iterations: int, cpu: int | None) -> None:
    """One process: ``iterations`` matmuls on one thread; prints its seconds."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(512, 512), torch.randn(64, 512)
    for _ in range(50):
        b @ a
    t0 = time.perf_counter()
    for _ in range(iterations):
        b @ a
    print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)


def trial(iterations: int, ranks: int, pin: bool) -> float:
    """Seconds of the slowest of ``ranks`` processes started together."""
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(iterations), str(i if pin else -1)],
                              stdout=subprocess.PIPE, text=True) for i in range(ranks)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError("a worker failed")
    return max(json.loads(o.strip().splitlines()[-1])["seconds"] for o in outs)


def half_width(diffs: list[float]) -> tuple[float, float]:
    """(mean, 95 % paired-t half-width) of ``diffs``."""
    from scipy import stats

    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    return mean, float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        worker(int(argv[1]), None if int(argv[2]) < 0 else int(argv[2]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--seconds", type=float, default=5.0, help="length of one trial's compute, s (sized once)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--pin", action="store_true", help="pin process i to CPU i")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    started, load_before = now_utc(), load()
    probe = trial(200, args.ranks, args.pin)
    iterations = max(200, int(200 * args.seconds / probe))
    trial(iterations, args.ranks, args.pin)  # discarded warm-up
    a_s, b_s = [], []
    for i in range(args.pairs):
        first_a = i % 2 == 0
        x, y = trial(iterations, args.ranks, args.pin), trial(iterations, args.ranks, args.pin)
        a, b = (x, y) if first_a else (y, x)
        a_s.append(a)
        b_s.append(b)
        print(f"pair {i + 1}: A {a:.3f} s, B {b:.3f} s, B/A {100 * (b / a - 1):+.2f} %", file=sys.stderr, flush=True)
    diffs = [100.0 * (b / a - 1.0) for a, b in zip(a_s, b_s)]
    rows = []
    for n in sorted({min(5, args.pairs), args.pairs}):
        if n >= 2:
            mean, hw = half_width(diffs[:n])
            rows.append((n, mean, hw))
    mean_a = sum(a_s) / len(a_s)
    cv = 100 * math.sqrt(sum((t - mean_a) ** 2 for t in a_s) / (len(a_s) - 1)) / mean_a
    lines = [f"machine_floor  {started}", machine_line(), f"load average before: {load_before}",
             f"{args.ranks} processes x {iterations} matmuls (64x512 @ 512x512, 1 thread), {'pinned' if args.pin else 'not pinned'}; "
             f"trial {mean_a:.2f} s; trial-to-trial CV (side A) {cv:.2f} %", "",
             "| pairs | A/A difference, mean % | 95 % half-width % |", "|---|---|---|"]
    lines += [f"| {n} | {mean:+.2f} | {hw:.2f} |" for n, mean, hw in rows]
    lines.append(f"load average after: {load()}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(args.out, text, {"benchmark": "machine_floor", "started": started, "machine": machine_line(),
                               "iterations": iterations, "pin": args.pin, "a_s": a_s, "b_s": b_s,
                               "half_widths": {str(n): hw for n, _, hw in rows}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
