"""What every process below a node's guard costs (the guard record's ``footprint``): each process's CPU seconds, peak
resident memory, peak thread count and bytes written to storage, sampled with psutil every :data:`INTERVAL_S`; the
exact figures the kernel keeps for a process the guard itself reaps (``os.wait4``) and for all of them together
(``getrusage(RUSAGE_CHILDREN)`` once every descendant is reaped). The kernel's peak RSS (``ru_maxrss``) of a process
started by fork and exec includes the image it was forked from: it is kept as an upper bound only. Fields: docs/formats.md, "Footprint".
"""

from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

import psutil

#: seconds between two samples of the process tree: a process that ends between samples loses at most this long of
#: its sampled figures (its exact ones where the guard reaps it)
INTERVAL_S = 0.5
#: ``ru_maxrss`` unit on Linux (KiB) and ``ru_oublock`` unit (512-byte blocks)
MAXRSS_BYTES = 1024
BLOCK_BYTES = 512


def process_kind(cmdline: List[str], name: str) -> str:
    """What a process is, from its command line: a Python module run with ``-m`` (``traceml.aggregator``), else the
    script a Python interpreter runs (``torchrun``), else the program's name (``py-spy``)."""
    program = os.path.basename(cmdline[0]) if cmdline else name
    if not program.startswith("python"):
        return program or name
    args = cmdline[1:]
    for index, arg in enumerate(args):
        if arg == "-m" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:]
        if arg == "-c":
            return "python -c"
        if not arg.startswith("-"):
            return os.path.basename(arg)
    return program


@dataclass
class ProcessTally:
    """One process below the guard as seen so far. CPU in s, memory and writes in bytes, epochs in Unix s."""

    pid: int
    ppid: int
    kind: str
    started_epoch: float
    last_seen_epoch: float
    cpu_user_s: float = 0.0
    cpu_system_s: float = 0.0
    peak_rss_bytes: int = 0
    peak_threads: int = 0
    # bytes the process caused to be written to storage (``/proc/<pid>/io`` write_bytes); None when unreadable
    write_bytes: Optional[int] = 0
    # True once the guard reaped it: its CPU and writes are then the kernel's totals, not samples (its peak RSS
    # stays the sampled one: the kernel's ``ru_maxrss`` of a process started by fork and exec keeps the peak of the
    # image it was forked from, so it is only an upper bound)
    exact: bool = False
    # True when ``peak_rss_bytes`` is that upper bound: no sample saw the process alive
    peak_rss_upper_bound: bool = False
    # CPU seconds (user + system) at the last sample that saw it alive (``last_seen_epoch``): with ``alive_s`` the
    # rate it ran at, whichever way its totals were read
    sampled_cpu_s: float = 0.0

    def to_record(self) -> Dict[str, object]:
        """The tally as the guard record keeps it, with ``cpu_s`` (user + system), ``alive_s`` (start to the last
        sample that saw it alive) and ``cores`` (CPU seconds per second alive, from the samples)."""
        alive_s = max(0.0, self.last_seen_epoch - self.started_epoch)
        return {**asdict(self), "cpu_s": self.cpu_user_s + self.cpu_system_s, "alive_s": alive_s,
                "cores": self.sampled_cpu_s / alive_s if alive_s > 0 else None}


class FootprintSampler:
    """Samples every descendant of ``root_pid`` (in a thread, :meth:`start`/:meth:`stop`) and takes the exact
    figures of processes reaped by the caller (:meth:`reaped`)."""

    def __init__(self, root_pid: int, interval_s: float = INTERVAL_S) -> None:
        self.root_pid = root_pid
        self.interval_s = interval_s
        self.samples = 0
        self.peak_rss_bytes = 0  # of all the processes together, at one sample
        self.peak_threads = 0
        self.io_problem: Optional[str] = None
        self._tallies: Dict[Tuple[int, float], ProcessTally] = {}
        self._lock = threading.RLock()  # the guard's signal handler may sample while its main thread is in reaped()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._start_children = resource.getrusage(resource.RUSAGE_CHILDREN)

    def start(self) -> None:
        """Sample every :attr:`interval_s` until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="footprint", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling, then take one last sample (what is still alive as the command ends)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        """One pass over the live descendants."""
        try:
            processes = psutil.Process(self.root_pid).children(recursive=True)
        except psutil.Error:
            return
        now = time.time()
        rss_total = threads_total = 0
        with self._lock:
            for process in processes:
                try:
                    with process.oneshot():
                        key = (process.pid, process.create_time())
                        tally = self._tallies.get(key)
                        if tally is None:
                            tally = ProcessTally(process.pid, process.ppid(),
                                                 process_kind(process.cmdline(), process.name()), key[1], now)
                            self._tallies[key] = tally
                        if tally.exact or process.status() == psutil.STATUS_ZOMBIE:
                            continue  # a zombie's memory is gone; its CPU is read when it is reaped
                        times = process.cpu_times()
                        rss, threads = process.memory_info().rss, process.num_threads()
                        written = self._written(process)
                except psutil.Error:
                    continue
                tally.last_seen_epoch = now
                tally.cpu_user_s, tally.cpu_system_s = times.user, times.system
                tally.sampled_cpu_s = times.user + times.system
                tally.peak_rss_bytes = max(tally.peak_rss_bytes, rss)
                tally.peak_threads = max(tally.peak_threads, threads)
                tally.write_bytes = None if written is None else max(tally.write_bytes or 0, written)
                rss_total += rss
                threads_total += threads
            self.samples += 1
            self.peak_rss_bytes = max(self.peak_rss_bytes, rss_total)
            self.peak_threads = max(self.peak_threads, threads_total)

    def _written(self, process: psutil.Process) -> Optional[int]:
        try:
            return int(process.io_counters().write_bytes)
        except (psutil.AccessDenied, AttributeError, NotImplementedError) as error:
            self.io_problem = f"per-process I/O counters unreadable: {type(error).__name__}"
            return None

    def reaped(self, pid: int, usage: resource.struct_rusage) -> None:
        """The kernel's totals for ``pid``, which the caller just reaped (``os.wait4``): exact for a process none of
        whose children was seen (a parent's totals would include its reaped children's)."""
        with self._lock:
            mine = [t for t in self._tallies.values() if t.pid == pid and not t.exact]
            if not mine or any(t.ppid == pid for t in self._tallies.values()):
                return
            tally = max(mine, key=lambda t: t.started_epoch)
            tally.cpu_user_s, tally.cpu_system_s = usage.ru_utime, usage.ru_stime
            if tally.peak_rss_bytes == 0:  # never sampled alive: the kernel's peak, an upper bound (see below)
                tally.peak_rss_bytes = usage.ru_maxrss * MAXRSS_BYTES
                tally.peak_rss_upper_bound = True
            tally.write_bytes = usage.ru_oublock * BLOCK_BYTES
            tally.exact = True

    def record(self) -> Dict[str, object]:
        """The guard record's ``footprint``; call once every descendant is reaped (its ``exact`` totals need that)."""
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = self._start_children
        own = resource.getrusage(resource.RUSAGE_SELF)
        with self._lock:
            processes = [t.to_record() for t in sorted(self._tallies.values(), key=lambda t: t.started_epoch)]
        return {
            "sample_interval_s": self.interval_s,
            "samples": self.samples,
            "processes": processes,
            "sampled": {"peak_rss_bytes": self.peak_rss_bytes, "peak_threads": self.peak_threads},
            "exact": {"user_s": now.ru_utime - start.ru_utime, "system_s": now.ru_stime - start.ru_stime,
                      "cpu_s": now.ru_utime - start.ru_utime + now.ru_stime - start.ru_stime,
                      "largest_peak_rss_bytes": now.ru_maxrss * MAXRSS_BYTES,
                      "write_bytes": (now.ru_oublock - start.ru_oublock) * BLOCK_BYTES},
            "guard_cpu_s": own.ru_utime + own.ru_stime,
            "problems": [self.io_problem] if self.io_problem else [],
        }
