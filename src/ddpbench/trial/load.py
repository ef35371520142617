"""What else ran during a trial: the trial record's ``load`` section, from two samples of /proc taken just before the
node agents start and just after they end (foreign CPU time and steal: docs/accuracy.md)."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from ddpbench.trial.guard import descendants, process_stats

#: clock ticks per second of the /proc times
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

ProcTimes = Dict[int, Tuple[int, int]]
"""pid -> (start time in ticks since boot, CPU ticks used by it and its reaped children)."""


@dataclass(frozen=True)
class LoadSample:
    """One reading of the machine's load, at one moment."""

    # seconds since boot when the sample started (from /proc/uptime), ticks
    uptime_ticks: int
    # 1-minute load average
    load1: Optional[float]
    # steal time summed over CPUs, ticks (None: not reported)
    steal_ticks: Optional[int]
    # processes outside the trial's tree: pid -> (start ticks, CPU ticks)
    foreign: ProcTimes = field(default_factory=dict)
    # seconds this sample took (wall)
    cost_s: float = 0.0


def _read(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("ascii", "replace")
    except OSError:
        return None


def sample(root_pid: Optional[int] = None) -> LoadSample:
    """Read the load now; processes in ``root_pid``'s tree (default: this process's) are the trial's own."""
    t0 = time.perf_counter()
    uptime = _read("/proc/uptime")
    uptime_ticks = int(float(uptime.split()[0]) * CLK_TCK) if uptime else 0
    try:
        load1: Optional[float] = os.getloadavg()[0]
    except OSError:
        load1 = None
    stat = _read("/proc/stat")  # steal: a column of its aggregate ``cpu`` line
    cpu = stat.split("\n", 1)[0].split() if stat else []
    steal = int(cpu[8]) if len(cpu) > 8 and cpu[0] == "cpu" else None
    stats = process_stats()
    root = os.getpid() if root_pid is None else root_pid
    own = {root, *descendants(root, stats)}
    foreign: ProcTimes = {}
    for pid, rest in stats.items():
        if pid not in own:  # start ticks, CPU ticks incl. reaped children
            with contextlib.suppress(IndexError, ValueError):
                foreign[pid] = (int(rest[19]), int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14]))
    return LoadSample(uptime_ticks, load1, steal, foreign, time.perf_counter() - t0)


def foreign_ticks(start: Mapping[int, Tuple[int, int]], end: Mapping[int, Tuple[int, int]], start_uptime_ticks: int) -> int:
    """CPU ticks the processes outside the trial used between two samples (docs/accuracy.md), at least 0."""
    total = 0
    for pid, (born, ticks) in end.items():
        before = start.get(pid)
        if before is not None and before[0] == born:
            total += ticks - before[1]
        elif born >= start_uptime_ticks:
            total += ticks
    for pid, (born, ticks) in start.items():
        after = end.get(pid)
        if after is None or after[0] != born:
            total -= ticks
    return max(total, 0)


def load_section(start: LoadSample, end: LoadSample, *, n_cpus: int, own_cpus: Optional[int],
                 cpu_affinity: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The trial record's ``load`` (keys: ``ddpbench.formats.trial_record.LOAD_KEYS``)."""
    steal = None
    if start.steal_ticks is not None and end.steal_ticks is not None:
        steal = (end.steal_ticks - start.steal_ticks) / CLK_TCK
    return {
        "n_cpus": n_cpus,
        "own_cpus": own_cpus,
        "load1_start": start.load1,
        "load1_end": end.load1,
        "foreign_cpu_s": foreign_ticks(start.foreign, end.foreign, start.uptime_ticks) / CLK_TCK,
        "steal_s": steal,
        "cpu_affinity": dict(cpu_affinity) if cpu_affinity is not None else None,
    }
