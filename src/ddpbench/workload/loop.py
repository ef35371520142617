"""One rank's training: the DDP step and its host-sync pattern, the warmup, the timed loop with its host timestamps
(``time.perf_counter`` at step boundaries; no device synchronisation inside the loop but one before the first timed
step and one after the last, whose time joins the last step; ``--timing phase`` synchronises after each phase). What
a step includes, and what switching turns off: docs/workload.md."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import resource
import time
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator

from ddpbench.choices import Device, GcMode, HostSyncPattern, Precision, SwitchWhat, Timing
from ddpbench.formats.rank_loop import HARNESS_HOST_SYNCS
from ddpbench.workload.args import RankArgs
from ddpbench.workload.base import Workload
from ddpbench.workload.device_time import DeviceStepClock, DeviceWait, step_clock
from ddpbench.workload.runtime import Runtime, TraceStep
from ddpbench.workload.stop import Faults, StopRule
from ddpbench.workload.switching import Switch
from ddpbench.workload.timing import InjectedWait
from ddpbench.workload.tools import ToolHooks

if TYPE_CHECKING:  # pragma: no cover
    import torch


class HostSync:
    """One rank's host-sync pattern (``--host-sync``): the hooks the step calls before its device work and after it."""

    def __init__(self, pattern: str, synchronize: Callable[[], None]) -> None:
        if pattern not in HARNESS_HOST_SYNCS:
            raise ValueError(f"host sync {pattern!r} is not one of {', '.join(HARNESS_HOST_SYNCS)}")
        self._synchronize = synchronize
        self.sync_before = pattern == HostSyncPattern.seed
        # the host-to-device copy runs inside the step marker
        self.copy_inside_marker = pattern == HostSyncPattern.seed
        self.read_loss = pattern in (HostSyncPattern.loss, HostSyncPattern.seed)
        self.last_loss = float("nan")

    def before_step(self) -> None:
        """Before the step's device work, after its batch was fetched."""
        if self.sync_before:
            self._synchronize()

    def after_step(self, loss: Any) -> None:
        """After the step (outside the step marker): read its loss when the pattern does."""
        if self.read_loss:
            self.last_loss = float(loss.detach())


class Trainer:
    """One rank's training state: the DDP model, AdamW, the loss, the fp16 scaler and the step."""

    def __init__(self, workload: Workload[Any], args: RankArgs[Any], rt: Runtime, trace_step: TraceStep | None) -> None:
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        self.rt = rt
        self.base_model = workload.build_model(args).to(rt.torch_device)
        ids = [rt.local_rank] if rt.device == Device.cuda else None
        self.model = DDP(self.base_model, device_ids=ids)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
        self.loss_fn = workload.loss_function(args)
        use_scaler = rt.device == Device.cuda and rt.precision == Precision.fp16
        self.scaler = torch.amp.GradScaler("cuda") if use_scaler else None
        self.trace_step = trace_step
        # within-trial switching (what=trace_step): whether the next steps run inside trace_step
        self.traced = True
        self.inject_wait = InjectedWait(args.inject_step_ms / 1000.0)
        # the injected device wait (calibration on CUDA), set once measured after the warm-up
        self.device_wait: DeviceWait | None = None
        self.host_sync = HostSync(args.host_sync, rt.synchronize)
        # the timed loop's device step clock (CUDA), set by run_timed for the timed steps only
        self.clock: DeviceStepClock | None = None
        self.non_blocking = rt.device == Device.cuda

    def _step_context(self) -> ContextManager[Any]:
        """``trace_step(model before DDP)`` under TraceML (unless switched off), else nothing."""
        return self.trace_step(self.base_model) if self.trace_step and self.traced else contextlib.nullcontext()

    def _to_device(self, batch: Any) -> tuple[Any, Any]:
        """The step's first device work (its clock's start event first): the batch's copy to the device."""
        if self.clock is not None:
            self.clock.step_begins()
        x, y = batch
        return (x.to(self.rt.torch_device, non_blocking=self.non_blocking),
                y.to(self.rt.torch_device, non_blocking=self.non_blocking))

    def _forward(self, x: Any, y: Any) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        with self.rt.autocast():
            return self.loss_fn(self.model(x), y)

    def _backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def _update(self) -> None:
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    def _marker_and_inner(self) -> tuple[ContextManager[Any], ContextManager[Any]]:
        """(around the copy and the step, around the step alone): the step marker goes where the pattern puts it."""
        if self.host_sync.copy_inside_marker:
            return self._step_context(), contextlib.nullcontext()
        return contextlib.nullcontext(), self._step_context()

    def _end_of_device_work(self, inject: bool) -> None:
        """The step's injected device wait, its end event, then the injected host wait (the GPU idles through it)."""
        if inject and self.device_wait is not None:
            self.device_wait()
        if self.clock is not None:
            self.clock.step_ends()
        if inject:
            self.inject_wait()

    def step(self, batch: Any, inject: bool) -> torch.Tensor:
        """One optimisation step on ``batch`` (the injected costs when ``inject``); its loss, not synchronised."""
        self.host_sync.before_step()
        outer, inner = self._marker_and_inner()
        with outer:
            x, y = self._to_device(batch)
            with inner:
                loss = self._forward(x, y)
                self._backward(loss)
                self._update()
                self._end_of_device_work(inject)
        self.host_sync.after_step(loss)
        return loss.detach()

    def step_phased(self, batches: Iterator[Any], inject: bool, phases_s: list[tuple[float, ...]]) -> torch.Tensor:
        """:meth:`step` with the batch fetch, the device synchronised after each phase; appends one tuple (s) in the
        order of ``formats.rank_record.PHASES`` but ``other`` (the rest: the pattern's sync, the injected waits)."""
        now, sync = time.perf_counter, self.rt.synchronize
        self.host_sync.before_step()
        t0 = now()
        batch = next(batches)
        t1 = now()
        outer, inner = self._marker_and_inner()
        with outer:
            x, y = self._to_device(batch)
            sync()
            t2 = now()
            with inner:
                loss = self._forward(x, y)
                sync()
                t3 = now()
                self._backward(loss)
                sync()
                t4 = now()
                self._update()
                sync()
                t5 = now()
                self._end_of_device_work(inject)
        phases_s.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4))
        self.host_sync.after_step(loss)
        return loss.detach()


@dataclasses.dataclass
class LoopResult:
    """What the timed loop measured."""

    durations_s: list[float] = dataclasses.field(default_factory=list)
    # --timing phase: per timed step, the seconds of each phase but ``other``
    phases_s: list[tuple[float, ...]] = dataclasses.field(default_factory=list)
    first_step_start_epoch: float = 0.0
    last_step_end_epoch: float = 0.0
    final_loss: float = float("nan")
    # CUDA: the device step clock of the timed loop (GPU-busy and GPU-idle per step), else None
    gpu: DeviceStepClock | None = None
    # the collector in the timed loop: the rank record's ``gc``
    gc: dict[str, Any] | None = None
    # this process's CPU seconds over the timed loop (``resource.getrusage``): the rank record's ``timed_cpu_s``
    timed_cpu_s: dict[str, float] | None = None


def cpu_seconds_since(start: resource.struct_rusage, steps: int) -> dict[str, float]:
    """This process's CPU seconds (all its threads; not its children) since ``start``: ``user``, ``system``,
    ``total``, and ``per_step_ms`` (total ms per step over ``steps`` steps)."""
    now = resource.getrusage(resource.RUSAGE_SELF)
    user, system = now.ru_utime - start.ru_utime, now.ru_stime - start.ru_stime
    return {"user": user, "system": system, "total": user + system,
            "per_step_ms": 1000.0 * (user + system) / steps if steps else 0.0}


def run_warmup(trainer: Trainer, batches: Iterator[Any], n: int, tools: ToolHooks | None = None) -> None:
    """``n`` untimed steps (inside trace_step under TraceML, without injected cost; the tools' hook after each)."""
    for _ in range(n):
        loss = trainer.step(next(batches), inject=False)
        if tools is not None:
            tools.step(loss)


def run_timed(
    args: RankArgs[Any], rt: Runtime, trainer: Trainer, batches: Iterator[Any], stop: StopRule, faults: Faults,
    tools: ToolHooks | None = None, switch: Switch | None = None,
) -> LoopResult:
    """The timed loop: per-step host timestamps at boundaries, faults, stop rule, rank-0 progress; ``tools`` after
    every step and ``switch``'s side at the start of each, inside the step's measured time."""
    res = LoopResult()
    log_every = args.log_every if rt.rank == 0 else 0
    phased = args.timing == Timing.phase
    clock = step_clock(rt.device)
    collections = _gc_enter(args.gc)
    rt.synchronize()
    boundary = time.perf_counter()
    res.first_step_start_epoch = time.time()
    cpu_start = resource.getrusage(resource.RUSAGE_SELF)
    stop.start(boundary)
    if clock is not None:
        clock.start()
        trainer.clock = clock
    loss = None
    for step in itertools.count(1):
        if faults.armed:
            faults.at_step(step)
        inject = True
        if switch is not None:
            on = switch.enter(step)
            trainer.traced = on or switch.what != SwitchWhat.trace_step
            inject = on or switch.what != SwitchWhat.inject
            if tools is not None:
                tools.begin(step, switch)
        if phased:
            loss = trainer.step_phased(batches, inject, res.phases_s)
        else:
            loss = trainer.step(next(batches), inject=inject)
        if tools is not None:
            tools.step(loss, step)
        done = stop.should_stop(step)
        now = time.perf_counter()
        res.durations_s.append(now - boundary)
        boundary = now
        if clock is not None:
            clock.collect()
        if log_every and step % log_every == 0:
            elapsed = now - stop.t0
            # no loss here: loss.item() would synchronise the device inside the timed loop
            print(f"step={step} elapsed_s={elapsed:.3f} steps_per_s={step / elapsed:.2f}", flush=True)
        if done:
            break
    rt.synchronize()
    res.durations_s[-1] += time.perf_counter() - boundary  # the closing synchronize belongs to the last step
    res.gc = _gc_exit(args.gc, collections)
    if clock is not None:
        clock.finish()
        trainer.clock = None
        res.gpu = clock
    if switch is not None:
        switch.finish()
        trainer.traced = True
    res.timed_cpu_s = cpu_seconds_since(cpu_start, len(res.durations_s))
    res.last_step_end_epoch = time.time()
    res.final_loss = float(loss.item()) if loss is not None else float("nan")
    return res


def _gc_collections() -> list[int]:
    return [int(generation["collections"]) for generation in gc.get_stats()]


def _gc_enter(mode: str) -> list[int]:
    """Set the collector for the timed loop (``--gc``); the collections so far per generation."""
    if mode in (GcMode.freeze, GcMode.off):
        gc.collect()
        if mode == GcMode.freeze:
            gc.freeze()
        else:
            gc.disable()
    return _gc_collections()


def _gc_exit(mode: str, before: list[int]) -> dict[str, Any]:
    """Restore the collector after the timed loop; the rank record's ``gc``."""
    collections = [after - earlier for after, earlier in zip(_gc_collections(), before)]
    frozen = gc.get_freeze_count()
    if mode == GcMode.freeze:
        gc.unfreeze()
    elif mode == GcMode.off:
        gc.enable()
    return {"mode": mode, "collections": collections, "frozen": frozen}
