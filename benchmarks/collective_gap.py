"""Does a wait between collectives make the next collective slower? (why calibration at ``model=tiny`` overshoots)

Starts 2 gloo ranks with ``torch.distributed.run`` (one thread each). Each rank repeats: wait G ms,
then ``all_reduce`` a 1,200-float tensor (about ``model=tiny``'s gradients), for G in ``--gaps``
and three ways of waiting: ``sleep``, ``hybrid`` (sleep, spin the last 0.2 ms: ddpbench's injected
wait) and ``spin``. Printed per (way, G): the mean wait overrun of both ranks, the mean all-reduce
time on rank 0, and the mean all-reduce time of whichever rank arrived last (it waited for nobody,
so its time is the collective's own, not the other rank's lateness).

If the last-arriving rank's all-reduce grows with G, an injected per-step wait of G ms costs the
step more than G ms whenever the step's own work between collectives is short. Usage::

    python benchmarks/collective_gap.py [--gaps 0,2,5,10,20] [--iterations 200] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load, machine_line, now_utc, write_out  # noqa: E402

WARMUP = 20


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def rank_main(gaps: list[float], iterations: int) -> None:
    """Inside torchrun: the measurement; rank 0 prints one tab-separated line per (way, gap)."""
    import torch
    import torch.distributed as dist

    from ddpbench.workload.timing import wait_until_known

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    tensor = torch.zeros(1200)
    ways: dict[str, Callable[[float], None]] = {"sleep": time.sleep, "hybrid": wait_until_known, "spin": _spin}
    for way, wait in ways.items():
        for gap in gaps:
            waits, reduces = [], []
            dist.barrier()
            for _ in range(iterations + WARMUP):
                t0 = time.perf_counter()
                if gap:
                    wait(gap / 1000.0)
                t1 = time.perf_counter()
                dist.all_reduce(tensor)
                waits.append(t1 - t0)
                reduces.append(time.perf_counter() - t1)
            both: list = [None, None]
            dist.all_gather_object(both, (waits[WARMUP:], reduces[WARMUP:]))
            if dist.get_rank() == 0:
                (w0, r0), (w1, r1) = both
                overrun = 1e3 * statistics.mean(w0 + w1) - gap
                last = 1e3 * statistics.mean(min(a, b) for a, b in zip(r0, r1))
                print(f"ROW\t{way}\t{gap:g}\t{overrun:.3f}\t{1e3 * statistics.mean(r0):.3f}\t{last:.3f}", flush=True)
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gaps", default="0,2,5,10,20", help="waits between collectives, ms, comma-separated")
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--port", type=int, default=29655)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    gaps = [float(g) for g in args.gaps.split(",")]
    if args.rank_main:
        rank_main(gaps, args.iterations)
        return 0
    started, load_before = now_utc(), load()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", f"--master-port={args.port}", __file__,
           "--rank-main", "--gaps", args.gaps, "--iterations", str(args.iterations)]
    out = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t")[1:] for line in out.splitlines() if line.startswith("ROW\t")]
    lines = [f"collective_gap  {started}", machine_line(), f"load average before: {load_before}",
             f"2 gloo ranks, all_reduce of 1,200 floats, {args.iterations} iterations per row", "",
             "| wait | gap ms | wait overrun ms | all-reduce ms (rank 0) | all-reduce ms (last to arrive) |",
             "|---|---|---|---|---|"]
    lines += [f"| {w} | {g} | {o} | {r0} | {last} |" for w, g, o, r0, last in rows]
    lines.append(f"load average after: {load()}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(args.out, text, {"benchmark": "collective_gap", "started": started, "machine": machine_line(),
                               "rows": [dict(zip(("wait", "gap_ms", "overrun_ms", "allreduce_ms_rank0",
                                                  "allreduce_ms_last"), r)) for r in rows]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
