"""The guard: runs one node agent's command (``python -m ddpbench.trial.guard --record FILE --parent PID -- CMD...``,
in a new session) so that nothing it started outlives it: it gets SIGTERM when the driver dies, even by SIGKILL
(``PR_SET_PDEATHSIG``), adopts what its command orphans (a child subreaper: TraceML starts its aggregator and torchrun
in sessions of their own) and SIGKILLs every descendant left. It writes FILE (JSON): ``spawn_epoch``, ``exit_epoch``,
``wall_s`` (monotonic, spawn to exit of the command: what shell ``time`` reports), ``exit_code``, ``signal``,
``leftovers_killed`` and ``footprint`` (what every process below it cost: :mod:`ddpbench.trial.footprint_sampler`). It
imports nothing heavy (psutil is small): its start-up cost is a bare interpreter's, paid equally by every mode, and so
is its sampling.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ddpbench.errors import error_line
from ddpbench.io import write_json_atomic
from ddpbench.trial.footprint_sampler import FootprintSampler
from ddpbench.workload.lifetime import become_subreaper, signal_on_parent_death


def process_stats() -> Dict[int, List[str]]:
    """Every process visible now: pid -> the fields of its /proc/<pid>/stat after the name (state, ppid, ...)."""
    stats: Dict[int, List[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read().decode("ascii", "replace")
        except OSError:
            continue
        stats[int(entry)] = stat[stat.rfind(")") + 2 :].split()
    return stats


def descendants(root_pid: int, stats: Optional[Mapping[int, Sequence[str]]] = None) -> List[int]:
    """Every process below ``root_pid`` in ``stats`` (default: the live ones now), children before grandchildren."""
    if stats is None:
        stats = {pid: fields for pid, fields in process_stats().items() if fields[0] != "Z"}
    children: Dict[int, List[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)
    found: Dict[int, None] = {}  # ordered, and safe against a pid reused while /proc was read
    frontier = [root_pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child != root_pid and child not in found:
                found[child] = None
                frontier.append(child)
    return list(found)


#: what is told of each process this one reaps: its pid and the kernel's totals for it
OnReaped = Callable[[int, resource.struct_rusage], None]


def _reap(on_reaped: Optional[OnReaped] = None) -> None:
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, _status, usage = os.wait4(-1, os.WNOHANG)
            if pid == 0:
                break
            if on_reaped is not None:
                on_reaped(pid, usage)


def kill_descendants(root_pid: int, deadline_s: float = 5.0, on_reaped: Optional[OnReaped] = None) -> int:
    """SIGKILL every descendant of ``root_pid`` until none is left or ``deadline_s`` passes; ``on_reaped`` hears of
    every child this process reaps meanwhile."""
    killed = 0
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        pids = descendants(root_pid)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        _reap(on_reaped)
        time.sleep(0.02)
    _reap(on_reaped)
    return killed


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command after ``--``; see the module docstring."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        return error_line("usage: --record FILE --parent PID -- CMD...", prog="ddpbench.trial.guard")
    split = args.index("--")
    options, command = args[:split], args[split + 1 :]
    record_path = options[options.index("--record") + 1]
    parent = int(options[options.index("--parent") + 1])

    signal_on_parent_death(signal.SIGTERM)
    become_subreaper()
    if os.getppid() != parent:
        return 143

    me = os.getpid()

    sampler = FootprintSampler(me)

    def write_record(exit_epoch: float, wall_s: float, code: Optional[int], signum: Optional[int],
                     leftovers: Optional[int], footprint: Dict[str, Any]) -> None:
        write_json_atomic(record_path, {"spawn_epoch": spawn_epoch, "exit_epoch": exit_epoch, "wall_s": wall_s,
                                        "exit_code": code, "signal": signum, "leftovers_killed": leftovers,
                                        "footprint": footprint})

    def on_signal(signum: int, _frame: object) -> None:
        sampler.stop()
        kill_descendants(me, on_reaped=sampler.reaped)
        write_record(time.time(), time.monotonic() - start, None, signum, None, sampler.record())
        os._exit(128 + signum)

    spawn_epoch = time.time()
    start = time.monotonic()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL,  # the command is SIGKILLed when the guard dies
                             preexec_fn=lambda: signal_on_parent_death(signal.SIGKILL))
    sampler.start()
    code = child.wait()
    exit_epoch, wall_s = time.time(), time.monotonic() - start
    sampler.stop()
    leftovers = kill_descendants(me, on_reaped=sampler.reaped)
    write_record(exit_epoch, wall_s, code, None, leftovers, sampler.record())
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
