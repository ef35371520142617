"""A process's life tied to its parent's through Linux ``prctl`` (the guard, a Ray node's keeper, every built-in
rank). Standard library only: the guard imports it. Elsewhere than Linux these calls do nothing."""

from __future__ import annotations

import ctypes

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
