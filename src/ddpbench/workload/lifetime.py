"""A process's life tied to its parent's through Linux ``prctl`` (the guard, a Ray node's keeper, every built-in
rank). Standard library only: the guard imports it. Elsewhere than Linux these calls do nothing."""

from __future__ import annotations

import ctypes
import os

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def signal_on_parent_death(signum: int) -> None:
    """Ask the kernel to send this process ``signum`` when its parent dies, even by SIGKILL."""
    _prctl(PR_SET_PDEATHSIG, int(signum))


def become_subreaper() -> None:
    """Processes this one's descendants orphan are re-parented to it, not to init."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def process_start_epoch(fallback: float) -> float:
    """This process's start time as the kernel keeps it (Unix s, from /proc on Linux); ``fallback`` elsewhere."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            start_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as handle:
            boot = next(float(line.split()[1]) for line in handle if line.startswith("btime "))
        return boot + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return fallback
