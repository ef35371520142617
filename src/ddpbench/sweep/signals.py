"""Stop signals during a sweep: SIGINT (Ctrl-C), SIGTERM and SIGHUP all stop the sweep the same way.

The first signal raises :class:`SweepStopped` (a KeyboardInterrupt, so the trial's wait stops its processes
as for Ctrl-C) in the main thread. A second one during the cleanup that follows ends the driver at once
with ``128 + signal``; the trial's guard gets its parent-death signal and kills what is left.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from types import FrameType
from typing import Iterator, Optional

#: the signals that stop a sweep
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class SweepStopped(KeyboardInterrupt):
    """The sweep was asked to stop by ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_signals() -> Iterator[None]:
    """Within the block, every stop signal raises :class:`SweepStopped`; a second one exits at once."""
    first: Optional[int] = None

    def on_signal(signum: int, frame: Optional[FrameType]) -> None:
        nonlocal first
        if first is None:
            first = signum
            raise SweepStopped(signum)
        name = signal.Signals(signum).name
        print(f"ddpbench: {name} during cleanup; exiting now", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
