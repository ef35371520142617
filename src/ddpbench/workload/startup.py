"""Where a rank's start-up goes: consecutive parts from the rank's first statement to its first timed step.

The harness marks the end of each part (:meth:`StartupClock.mark`); each mark adds the time since the previous one
to its part, so the parts (:data:`ddpbench.formats.rank_loop.STARTUP_PARTS`) add up to the whole start-up of the
rank. What ran before the rank's first statement (the launcher, a tool's launcher, the interpreter's own start) is
the trial's to measure: from the node agent's spawn to the rank's ``timestamps.process_start``. Torch-free.
"""

from __future__ import annotations

import time

from ddpbench.formats.rank_loop import STARTUP_PARTS


class StartupClock:
    """Seconds of each start-up part of this rank (Unix clock, as the record's timestamps)."""

    def __init__(self, process_start_epoch: float) -> None:
        # the end of the previous part, epoch s
        self.last = process_start_epoch
        # part -> s so far
        self.parts = dict.fromkeys(STARTUP_PARTS, 0.0)

    def mark(self, part: str, now: float | None = None) -> None:
        """``part`` ends now (or at epoch ``now``): it gets the time since the previous mark."""
        if part not in self.parts:
            raise ValueError(f"unknown start-up part {part!r}")
        now = time.time() if now is None else now
        self.parts[part] += max(0.0, now - self.last)
        self.last = max(self.last, now)

    def record(self) -> dict[str, float]:
        """The rank record's ``startup_s``."""
        return dict(self.parts)
