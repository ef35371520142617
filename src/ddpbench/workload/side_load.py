"""A known side process for the footprint's calibration (``mode=inject inject.side_cpu=0.5 inject.side_mb=200``):
``python -m ddpbench.workload.side_load --cpu F --mb N`` holds N MiB resident and spins at F of one core until its
parent (the rank that started it) dies, then writes what it got (``--report``). Standard library only, so its own interpreter adds as little as possible to
the memory it is known to hold.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

from ddpbench.io import write_json_atomic
from ddpbench.workload.lifetime import process_start_epoch, signal_on_parent_death

#: the spin's period, s: CPU is paid in slices of at most this length
PERIOD_S = 0.01
#: bytes per page touched to make the held memory resident
PAGE_BYTES = 4096


def report_name(node_rank: int) -> str:
    """The file name of node ``node_rank``'s side process report, in the rank records' folder."""
    return f"side-load-node{int(node_rank)}.json"


def hold_memory(mib: float) -> bytearray:
    """``mib`` MiB of memory, every page written so that it is resident (not the kernel's shared zero page)."""
    held = bytearray(int(mib * 2**20))
    for offset in range(0, len(held), PAGE_BYTES):
        held[offset] = 1
    return held


def spin(cpu: float) -> None:
    """Use ``cpu`` of one core for ever: spin while this process's CPU time is behind ``cpu`` × the wall time since
    the start, else sleep one period (so a busy machine that delays it does not make it spin above its share)."""
    start_wall, start_cpu = time.monotonic(), time.process_time()
    while True:
        behind = cpu * (time.monotonic() - start_wall) - (time.process_time() - start_cpu)
        if behind > 0:
            end = time.process_time() + min(behind, PERIOD_S)
            while time.process_time() < end:
                pass
        else:
            time.sleep(min(-behind / cpu if cpu > 0 else PERIOD_S, PERIOD_S))


def start(cpu: float, mib: float, report: Optional[str]) -> subprocess.Popen:
    """Start the side process (a child of this process that ends with it); ``report``: where it writes what it got."""
    argv = [sys.executable, "-m", "ddpbench.workload.side_load", f"--cpu={cpu:g}", f"--mb={mib:g}"]
    return subprocess.Popen(argv + ([f"--report={report}"] if report else []), stdin=subprocess.DEVNULL,
                            preexec_fn=lambda: signal_on_parent_death(signal.SIGTERM))


def rss_bytes() -> int:
    """This process's resident set now, bytes (``/proc/self/statm``; 0 where there is none). Not ``ru_maxrss``: a
    process started by fork and exec keeps the peak of the image it was forked from there."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def own_figures(cpu: float, mib: float, started_epoch: float, baseline_rss: int) -> Dict[str, float]:
    """What this process was asked for and what it got, as it sees itself: ``cpu_s`` (user + system), ``wall_s``
    (since the kernel started it), ``cores`` (their ratio), ``rss_bytes`` (its resident set at the end) and
    ``baseline_rss_bytes`` (before it allocated: the interpreter's own)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s, wall_s = usage.ru_utime + usage.ru_stime, time.time() - started_epoch
    return {"asked_cpu": cpu, "asked_mb": mib, "cpu_s": cpu_s, "wall_s": wall_s,
            "cores": cpu_s / wall_s if wall_s > 0 else 0.0, "rss_bytes": float(rss_bytes()),
            "baseline_rss_bytes": float(baseline_rss)}


def main(argv: Optional[List[str]] = None) -> int:
    """Hold ``--mb`` MiB and spin at ``--cpu`` of a core until SIGTERM (sent when the parent dies); then write what it
    got to ``--report`` (JSON), if given."""
    started_epoch = process_start_epoch(time.time())
    parser = argparse.ArgumentParser(prog="ddpbench.workload.side_load")
    parser.add_argument("--cpu", type=float, default=0.0, help="fraction of one core to use (0 to 1)")
    parser.add_argument("--mb", type=float, default=0.0, help="MiB to hold resident")
    parser.add_argument("--report", default=None, help="JSON file to write its own figures to when it ends")
    args = parser.parse_args(argv)

    baseline_rss = rss_bytes()

    def end(_signum: int, _frame: object) -> None:
        if args.report:
            write_json_atomic(args.report, own_figures(args.cpu, args.mb, started_epoch, baseline_rss))
        os._exit(0)

    signal.signal(signal.SIGTERM, end)
    held = hold_memory(args.mb)
    if args.cpu > 0:
        spin(min(args.cpu, 1.0))
    while held:  # the held memory stays referenced until the process ends
        time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
