"""When the timed loop ends (``--steps``, or the lockstep ``--duration-sec`` stop), and the fault knobs: at the start
of timed step N on ``--fault-rank`` (else every rank) a crash is ``os._exit(3)`` (no rank record), a hang sleeps
forever. docs/workload.md has the rules."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from ddpbench.workload.args import RankArgs


def targeted(args: RankArgs[Any], rank: int) -> bool:
    """Whether the fault knobs apply to ``rank`` (``--fault-rank`` or every rank)."""
    return args.fault_rank is None or args.fault_rank == rank


class StopRule:
    """Decides after each timed step whether to leave the loop, identically on every rank unless unsynced."""

    def __init__(self, args: RankArgs[Any], rank: int, stop_group: Any) -> None:
        self.steps: int | None = args.steps
        self.duration_s: float | None = args.duration_sec
        self.every: int = args.stop_check_every
        self.synced: bool = not args.no_sync_stop
        self.skew_s: float = args.fault_clock_skew_sec if targeted(args, rank) else 0.0
        self.group = stop_group
        self.t0: float = 0.0
        self._flag: Any = None

    @property
    def reason(self) -> str:
        """``stop_reason`` of the rank JSON."""
        if self.steps is not None:
            return "steps"
        return "duration" if self.synced else "duration_unsynced"

    def start(self, t0: float) -> None:
        """Start the (possibly skewed) stop clock at perf_counter time ``t0``."""
        import torch

        self.t0 = t0
        self._flag = torch.zeros(1, dtype=torch.int32)

    def _local_expired(self) -> bool:
        assert self.duration_s is not None
        return time.perf_counter() + self.skew_s - self.t0 >= self.duration_s

    def should_stop(self, step: int) -> bool:
        """After timed step ``step`` (1-based): stop now? Collective on check steps in synced duration mode."""
        if self.steps is not None:
            return step >= self.steps
        if not self.synced:
            return self._local_expired()
        if step % self.every:
            return False
        import torch.distributed as dist

        self._flag.fill_(1 if self._local_expired() else 0)
        dist.all_reduce(self._flag, op=dist.ReduceOp.MAX, group=self.group)
        return bool(self._flag.item())


class Faults:
    """The crash/hang knobs of this rank: :meth:`at_step` fires them at the start of a timed step."""

    def __init__(self, args: RankArgs[Any], rank: int) -> None:
        on = targeted(args, rank)
        self.rank = rank
        self.crash_at: int | None = args.fault_crash_at_step if on else None
        self.hang_at: int | None = args.fault_hang_at_step if on else None
        self.armed = self.crash_at is not None or self.hang_at is not None

    def at_step(self, step: int) -> None:
        """Crash or hang now if timed step ``step`` is the configured one."""
        if self.crash_at == step:
            print(f"[rank{self.rank}] fault: crash at timed step {step}", file=sys.stderr, flush=True)
            os._exit(3)
        if self.hang_at == step:
            print(f"[rank{self.rank}] fault: hang at timed step {step}", file=sys.stderr, flush=True)
            while True:
                time.sleep(3600)
