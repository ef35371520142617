"""ddpbench's recorder for a user's own training script (``workload=script workload.records=true``): step times, the
lockstep stop and the rank record, as the environment below asks (without ``DDPBENCH_METRICS_DIR``: nothing). No
Hydra here. How a script marks its steps: :class:`Recorder`, docs/workload.md ("Your own script")."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Iterator, Optional

from ddpbench.choices import HostSyncPattern
from ddpbench.formats.rank_record import OWN_LOADER
from ddpbench.workload.args import RankArgs
from ddpbench.workload.device_time import DeviceStepClock, step_clock
from ddpbench.workload.lifetime import process_start_epoch
from ddpbench.workload.loop import LoopResult
from ddpbench.workload.record import build_record, write_record
from ddpbench.workload.runtime import Runtime
from ddpbench.workload.sizes import Sizes
from ddpbench.workload.stop import StopRule

# what ddpbench tells the recorder (their meaning: docs/workload.md, "Your own script")
ENV_METRICS_DIR = "DDPBENCH_METRICS_DIR"
ENV_STOP_STEPS = "DDPBENCH_STOP_STEPS"
ENV_STOP_DURATION_S = "DDPBENCH_STOP_DURATION_S"
ENV_STOP_CHECK_EVERY = "DDPBENCH_STOP_CHECK_EVERY"
ENV_WARMUP_STEPS = "DDPBENCH_WARMUP_STEPS"
ENV_SAVE_STEP_TIMES = "DDPBENCH_SAVE_STEP_TIMES"
ENV_WORKLOAD = "DDPBENCH_WORKLOAD"
ENV_FAULT_CLOCK_SKEW_S = "DDPBENCH_FAULT_CLOCK_SKEW_S"
ENV_FAULT_RANK = "DDPBENCH_FAULT_RANK"

RECORDER_ENV = (ENV_METRICS_DIR, ENV_STOP_STEPS, ENV_STOP_DURATION_S, ENV_STOP_CHECK_EVERY, ENV_WARMUP_STEPS,
                ENV_SAVE_STEP_TIMES, ENV_WORKLOAD, ENV_FAULT_CLOCK_SKEW_S, ENV_FAULT_RANK)
"""Every variable the recorder reads."""


def environment(metrics_dir: str, *, warmup_steps: int, save_step_times: bool, workload: str,
                steps: Optional[int] = None, duration_s: Optional[float] = None, check_every: int = 50,
                clock_skew_s: float = 0.0, fault_rank: Optional[int] = None) -> dict[str, str]:
    """The variables that tell a recorder what to do: ``steps`` timed steps, or a lockstep stop after
    ``duration_s`` s checked every ``check_every`` steps, or (neither) no stop; the clock-skew fault."""
    env = {ENV_METRICS_DIR: metrics_dir, ENV_WARMUP_STEPS: str(warmup_steps),
           ENV_SAVE_STEP_TIMES: "1" if save_step_times else "0", ENV_WORKLOAD: workload}
    if steps is not None:
        env[ENV_STOP_STEPS] = str(steps)
    elif duration_s is not None:
        env.update({ENV_STOP_DURATION_S: str(duration_s), ENV_STOP_CHECK_EVERY: str(check_every)})
    if clock_skew_s:
        env[ENV_FAULT_CLOCK_SKEW_S] = str(clock_skew_s)
    if fault_rank is not None:
        env[ENV_FAULT_RANK] = str(fault_rank)
    return env


_IMPORTED = time.time()


def _process_start_epoch() -> float:
    """This process's start time (Unix s) from /proc on Linux; the recorder's import time elsewhere."""
    return process_start_epoch(_IMPORTED)


def rank_arguments(env: dict[str, str], batch_size: int) -> RankArgs[Sizes]:
    """The harness's arguments ddpbench's environment gives a script's ranks (no stop asked: neither steps nor
    duration)."""
    steps, duration = env.get(ENV_STOP_STEPS), env.get(ENV_STOP_DURATION_S)
    return RankArgs(
        sizes=Sizes(), batch_size=int(batch_size), warmup_steps=int(env.get(ENV_WARMUP_STEPS) or 0),
        save_step_times=env.get(ENV_SAVE_STEP_TIMES) == "1", host_sync=HostSyncPattern.own,
        steps=int(steps) if steps else None, duration_sec=float(duration) if duration else None,
        stop_check_every=int(env.get(ENV_STOP_CHECK_EVERY) or RankArgs.stop_check_every),
        fault_clock_skew_sec=float(env.get(ENV_FAULT_CLOCK_SKEW_S) or 0.0),
        fault_rank=int(env[ENV_FAULT_RANK]) if env.get(ENV_FAULT_RANK) else None,
    )


class Recorder:
    """Times one rank's steps, applies ddpbench's stop rule and writes its rank record; create it on every rank after
    ``init_process_group``. ``batch_size``: samples per step on this rank; ``device``: default ``cuda`` on nccl, else
    ``cpu``; ``precision``: what the script trains in; ``loader``: its DataLoader, if any (the record's ``data``);
    ``env``: the environment to read (default ``os.environ``)."""

    def __init__(self, batch_size: int, *, device: Optional[str] = None, precision: str = "fp32",
                 loader: Any = None, env: Optional[dict[str, str]] = None) -> None:
        environ = dict(os.environ if env is None else env)
        self.metrics_dir = environ.get(ENV_METRICS_DIR) or None
        self.pg_ready_epoch = time.time()
        self.args = rank_arguments(environ, batch_size)
        self.warmup_steps = self.args.warmup_steps
        self.steps_done = 0
        self.result = LoopResult()
        self._boundary: Optional[float] = None
        # where the first timed step starts when only step_done() marks steps: warmup's end, else creation
        self._warmup_end = time.perf_counter()
        self._loss: Any = None
        self._decided: dict[int, bool] = {}
        # the device step clock (CUDA, from the first timed step; None once a timed step's start went unmarked)
        self.clock: Optional[DeviceStepClock] = None
        self._begun = False
        self.workload = environ.get(ENV_WORKLOAD) or "script"
        self.data = _describe_loader(loader)
        if not self.active:
            return
        import torch.distributed as dist

        backend = str(dist.get_backend()) if dist.is_initialized() else "gloo"
        self.rt = Runtime(device or ("cuda" if backend == "nccl" else "cpu"), backend, precision)
        needs_group = self.args.duration_sec is not None and backend != "gloo"
        self.stop = StopRule(self.args, self.rt.rank, dist.new_group(backend="gloo") if needs_group else None)
        if self.warmup_steps == 0:
            self._start_clock()

    def _start_clock(self) -> None:
        """The timed steps begin: a device step clock on CUDA (its opening event now)."""
        self.clock = step_clock(self.rt.device)
        if self.clock is not None:
            self.clock.start()

    @property
    def active(self) -> bool:
        """Whether ddpbench asked for a record (``DDPBENCH_METRICS_DIR`` set)."""
        return self.metrics_dir is not None

    @property
    def timed_steps(self) -> int:
        """Timed steps completed so far."""
        return max(0, self.steps_done - self.warmup_steps)

    def _mark_start(self) -> None:
        """The first timed step starts now unless a previous step's end already marks it."""
        if not self.active or self.steps_done != self.warmup_steps or self._boundary is not None:
            return
        self.rt.synchronize()
        self._boundary = time.perf_counter()
        self.result.first_step_start_epoch = time.time()
        self.stop.start(self._boundary)

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """Time the block as one training step."""
        self._mark_start()
        self.step_begins()
        yield
        self.step_done()

    def step_begins(self) -> None:
        """Mark where a step's device work begins (once per step): CUDA's GPU-busy/idle split needs it on every one."""
        if self.clock is not None and not self._begun:
            self.clock.step_begins()
            self._begun = True

    def step_done(self, loss: Any = None) -> None:
        """Mark the end of a training step; ``loss`` (optional, a number or a 0-d tensor) is the record's final loss."""
        if not self.active:
            return
        self.steps_done += 1
        if loss is not None:
            self._loss = loss
        now = time.perf_counter()
        if self.steps_done <= self.warmup_steps:
            self._warmup_end = now
            if self.steps_done == self.warmup_steps:
                self._start_clock()
            return
        if self.clock is not None:
            if self._begun:
                self.clock.step_ends()
                self.clock.collect()
            else:  # a timed step without its start: no GPU split for this rank
                self.clock = None
        self._begun = False
        if self._boundary is None:  # step_done() without step(): the first timed step began at warmup's end
            self._boundary = self._warmup_end
            self.result.first_step_start_epoch = time.time() - (now - self._boundary)
            self.stop.start(self._boundary)
        self.result.durations_s.append(now - self._boundary)
        self.result.last_step_end_epoch = time.time()
        self._boundary = now

    def should_stop(self) -> bool:
        """Whether to leave the training loop now (ddpbench's stop rule; a collective on check steps: call it once per
        step on every rank). ``False`` while warming up, and always without ddpbench's environment."""
        if not self.active or (self.args.steps is None and self.args.duration_sec is None):
            return False
        step = self.timed_steps
        if step == 0:
            return False
        if step not in self._decided:
            self._decided = {step: self.stop.should_stop(step)}
        return self._decided[step]

    def finish(self, loss: Any = None) -> None:
        """Write this rank's record into ``DDPBENCH_METRICS_DIR`` (nothing without it); call it right after the loop
        (on CUDA its synchronize closes the last step). ``loss``: the final loss, if not given to :meth:`step_done`."""
        if not self.active:
            return
        if not self.result.durations_s:
            raise RuntimeError(f"ddpbench recorder: no timed step ({self.steps_done} steps, "
                               f"{self.warmup_steps} of them warmup); mark steps with step() or step_done()")
        if self.rt.device == "cuda":  # the closing synchronize belongs to the last step, as in the harness
            self.rt.synchronize()
            self.result.durations_s[-1] += time.perf_counter() - (self._boundary or time.perf_counter())
            self.result.last_step_end_epoch = time.time()
        if self.clock is not None and self.clock.steps == len(self.result.durations_s):
            self.clock.finish()
            self.result.gpu = self.clock
        final = loss if loss is not None else self._loss
        self.result.final_loss = float(final) if final is not None else None  # type: ignore[assignment]
        record = build_record(
            self.args, self.rt, self.result, workload=self.workload, data=self.data,
            process_start_epoch=min(_process_start_epoch(), self.pg_ready_epoch), pg_ready_epoch=self.pg_ready_epoch,
            traceml_active=False, stop_reason=self.stop.reason,
        )
        write_record(str(self.metrics_dir), record)

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is None:
            self.finish()


def _describe_loader(loader: Any) -> dict[str, Any]:
    """The record's ``data`` for a script's own loader: kind ``own``, workers etc. when a DataLoader is given."""
    workers = getattr(loader, "num_workers", None)
    return {
        "loader": OWN_LOADER,
        "workers": int(workers) if workers is not None else None,
        "prefetch_factor": getattr(loader, "prefetch_factor", None) if workers else None,
        "pin_memory": bool(getattr(loader, "pin_memory", False)),
    }
