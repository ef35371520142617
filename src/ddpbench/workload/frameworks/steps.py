"""One rank's optimizer steps in a framework Trainer, timed, stopped and recorded by ddpbench's Recorder (what the
framework callbacks share), and its process group ended before the interpreter exits: neither Lightning under
torchrun nor the HF Trainer destroys it, and freed at shutdown on gloo a rank can die with SIGABRT (docs/workload.md).
"""

from __future__ import annotations

import atexit
import datetime as dt
import gc
import os
import sys
from typing import Any, Mapping, Optional

from ddpbench.workload.frameworks import ENV_PROFILER_SCHEDULE
from ddpbench.workload.recorder import Recorder, rank_arguments

#: the longest a rank waits at exit for its peers to end training too, s; past it the rank ends its group alone
BARRIER_TIMEOUT_S = 60.0

UNBOUNDED = -1
""":meth:`TrainerSteps.step_limit` for stop=duration: the Trainer runs until ddpbench stops it."""


class TrainerSteps:
    """ddpbench's recorder for the optimizer steps of one framework Trainer on this rank, created by :meth:`start`
    once training starts; ``env``: the environment to read (default ``os.environ``)."""

    def __init__(self, env: Optional[Mapping[str, str]] = None) -> None:
        self.env = dict(os.environ if env is None else env)
        # the stop settings (the batch size comes with start())
        self.args = rank_arguments(self.env, batch_size=1)
        self.recorder: Optional[Recorder] = None
        self.loss: Any = None

    def step_limit(self) -> Optional[int]:
        """The Trainer's optimizer-step limit: warmup + timed steps (stop=steps), :data:`UNBOUNDED`
        (stop=duration), or None: keep the script's own (``stop.from_script``)."""
        if self.args.steps is not None:
            return self.args.warmup_steps + self.args.steps
        return UNBOUNDED if self.args.duration_sec is not None else None

    def start(self, batch_size: int, precision: str = "fp32", device: Optional[str] = None) -> None:
        """Create the recorder (once): ``batch_size`` samples per optimizer step on this rank."""
        if self.recorder is None:
            self.recorder = Recorder(batch_size, device=device, precision=precision, env=self.env)

    def step_begins(self) -> None:
        """Where an optimizer step's device work begins (its first micro-batch; later calls in the step do nothing)."""
        if self.recorder is not None:
            self.recorder.step_begins()

    def step_done(self, loss: Any = None) -> bool:
        """Mark the end of one optimizer step; whether the Trainer must stop now (the same on every rank). ``loss``: a
        number or a tensor, kept as it is (read once, in :meth:`finish`: no device sync here)."""
        if self.recorder is None:
            return False
        if loss is not None:
            self.loss = loss
        self.recorder.step_done()
        return self.recorder.should_stop()

    def finish(self) -> None:
        """Write this rank's record (nothing if training never started); end the process group at exit."""
        end_process_group_at_exit()
        if self.recorder is not None:
            loss = self.loss.detach().float().cpu() if hasattr(self.loss, "detach") else self.loss
            self.recorder.finish(loss=loss)
            self.recorder = None


def precision_name(text: Any) -> str:
    """``fp32``, ``bf16`` or ``fp16`` from a framework's precision setting (``"bf16-mixed"``, ``16``, ...)."""
    value = str(text).lower()
    if "bf16" in value:
        return "bf16"
    return "fp16" if value.startswith("16") or "fp16" in value else "fp32"


def profiler_schedule() -> Any:
    """``torch.profiler.schedule`` from ``$DDPBENCH_TORCH_PROFILER`` (``wait,warmup,active,repeat``; default 1,1,3,1)."""
    import torch

    wait, warmup, active, repeat = (int(x) for x in (os.environ.get(ENV_PROFILER_SCHEDULE) or "1,1,3,1").split(","))
    return torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat)


def end_process_group_at_exit() -> None:
    """Arrange, once per process, for :func:`end_process_group` to run when the interpreter exits normally."""
    atexit.unregister(end_process_group)  # a second Trainer's end moves it, it does not add one
    atexit.register(end_process_group)


def end_process_group(timeout_s: float = BARRIER_TIMEOUT_S) -> None:
    """Free what still holds the default process group, wait for the peers (gloo: bounded) and destroy it, if it
    still exists; skipped after an uncaught exception (peers may be stuck in a collective). Failures: one line."""
    if getattr(sys, "last_value", None) is not None:
        return
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    try:
        gc.collect()  # DDP's reducer, no longer referenced, would otherwise outlive the group
        if dist.get_backend() == "gloo":
            dist.monitored_barrier(timeout=dt.timedelta(seconds=timeout_s))
        dist.destroy_process_group()
    except Exception as error:  # noqa: BLE001 - at exit, after training: say it and let the process end
        print(f"ddpbench: the process group was not ended cleanly at exit: {error}", file=sys.stderr, flush=True)
