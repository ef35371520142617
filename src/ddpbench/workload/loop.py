"""One rank's training: the DDP step, the warmup and the timed loop with its host timestamps.

Timing: host ``time.perf_counter`` at step boundaries, no device synchronisation inside the timed
loop; on CUDA one synchronize before the first timed step and one after the last (its time is
added to the last step). Each step's duration runs from its start boundary to the next one, so it
includes the data fetch, the stop check and the injected cost. Under TraceML every step, warmup
included, runs inside ``trace_step(model before DDP)``; the batch fetch and the stop check lie
outside it, the injected step cost inside. Under within-trial switching (``--switch-block-steps``,
:mod:`ddpbench.workload.switching`) the timed steps of off-blocks run without the switched work
(``trace_step``, the injected wait, the tools' per-step work); warmup steps are never switched.

``--timing phase`` also times each step's phases: data wait (``next`` on the loader), host-to-device
copy, forward (zero_grad + forward + loss), backward, optimizer (step, scaler update), each closed
by a CUDA synchronize; ``other`` is the rest of the step (TraceML's step marker, the stop check,
injected cost, bookkeeping). Those synchronisations change what they time: quote ``step`` timing.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import TYPE_CHECKING, Any, ContextManager, Iterator

from ddpbench.formats.rank_record import PHASES
from ddpbench.workload.base import Workload
from ddpbench.workload.runtime import Runtime, TraceStep
from ddpbench.workload.stop import Faults, StopRule
from ddpbench.workload.switching import Switch
from ddpbench.workload.timing import InjectedWait
from ddpbench.workload.tools import ToolHooks

if TYPE_CHECKING:  # pragma: no cover
    import torch

TIMED_PHASES = PHASES[:-1]
"""Phases :meth:`Trainer.step_phased` times; the last of PHASES (``other``) is the rest of the step."""


class Trainer:
    """One rank's training state: the DDP model, AdamW, the loss, the fp16 scaler and the step."""

    def __init__(self, workload: Workload, args: argparse.Namespace, rt: Runtime, trace_step: TraceStep | None) -> None:
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        self.rt = rt
        self.base_model = workload.build_model(args).to(rt.torch_device)
        ids = [rt.local_rank] if rt.device == "cuda" else None
        self.model = DDP(self.base_model, device_ids=ids)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
        self.loss_fn = workload.loss_function(args)
        use_scaler = rt.device == "cuda" and rt.precision == "fp16"
        self.scaler = torch.amp.GradScaler("cuda") if use_scaler else None
        self.trace_step = trace_step
        # within-trial switching (what=trace_step): whether the next steps run inside trace_step
        self.traced = True
        self.inject_wait = InjectedWait(args.inject_step_ms / 1000.0)
        self.non_blocking = rt.device == "cuda"

    def _step_context(self) -> ContextManager[Any]:
        """``trace_step(model before DDP)`` under TraceML (unless switched off), else nothing."""
        return self.trace_step(self.base_model) if self.trace_step and self.traced else contextlib.nullcontext()

    def _to_device(self, batch: Any) -> tuple[Any, Any]:
        x, y = batch
        return (x.to(self.rt.torch_device, non_blocking=self.non_blocking),
                y.to(self.rt.torch_device, non_blocking=self.non_blocking))

    def _forward(self, x: Any, y: Any) -> "torch.Tensor":
        self.optimizer.zero_grad(set_to_none=True)
        with self.rt.autocast():
            return self.loss_fn(self.model(x), y)

    def _backward(self, loss: "torch.Tensor") -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def _update(self) -> None:
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    def step(self, batch: Any, inject: bool) -> "torch.Tensor":
        """One optimisation step on ``batch``; wait out the injected cost when ``inject``. Returns the loss (no sync)."""
        x, y = self._to_device(batch)
        with self._step_context():
            loss = self._forward(x, y)
            self._backward(loss)
            self._update()
            if inject:
                self.inject_wait()
        return loss.detach()

    def step_phased(self, batches: Iterator[Any], inject: bool, phases_s: list[tuple[float, ...]]) -> "torch.Tensor":
        """:meth:`step` with the batch fetch, timing each phase; appends one tuple (s) in :data:`TIMED_PHASES` order.

        The device is synchronised after each phase (CUDA), so the phases add up to the work done.
        """
        now, sync = time.perf_counter, self.rt.synchronize
        t0 = now()
        batch = next(batches)
        t1 = now()
        x, y = self._to_device(batch)
        sync()
        t2 = now()
        with self._step_context():
            loss = self._forward(x, y)
            sync()
            t3 = now()
            self._backward(loss)
            sync()
            t4 = now()
            self._update()
            sync()
            t5 = now()
            if inject:
                self.inject_wait()
        phases_s.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4))
        return loss.detach()


class LoopResult:
    """What the timed loop measured."""

    def __init__(self) -> None:
        self.durations_s: list[float] = []
        # --timing phase: per timed step, the seconds of each of TIMED_PHASES
        self.phases_s: list[tuple[float, ...]] = []
        self.first_step_start_epoch: float = 0.0
        self.last_step_end_epoch: float = 0.0
        self.final_loss: float = float("nan")


def run_warmup(trainer: Trainer, batches: Iterator[Any], n: int, tools: ToolHooks | None = None) -> None:
    """``n`` untimed steps (inside trace_step under TraceML, without injected cost; the tools' hook after each)."""
    for _ in range(n):
        loss = trainer.step(next(batches), inject=False)
        if tools is not None:
            tools.step(loss)


def run_timed(
    args: argparse.Namespace, rt: Runtime, trainer: Trainer, batches: Iterator[Any], stop: StopRule, faults: Faults,
    tools: ToolHooks | None = None, switch: Switch | None = None,
) -> LoopResult:
    """The timed loop: per-step host timestamps at boundaries, faults, stop rule, rank-0 progress.

    ``tools``: the in-process tools' hook, run after every step inside its measured time. ``switch``: within-trial
    switching; at the start of each timed step it sets the side (inside the step's measured time), and what it
    switches (``trace_step``, the injected wait, the tools' per-step work) follows it.
    """
    res = LoopResult()
    log_every = args.log_every if rt.rank == 0 else 0
    phased = args.timing == "phase"
    rt.synchronize()
    boundary = time.perf_counter()
    res.first_step_start_epoch = time.time()
    stop.start(boundary)
    loss = None
    step = 0
    while True:
        step += 1
        if faults.armed:
            faults.at_step(step)
        inject = True
        if switch is not None:
            on = switch.enter(step)
            trainer.traced = on or switch.what != "trace_step"
            inject = on or switch.what != "inject"
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
        if log_every and step % log_every == 0:
            elapsed = now - stop.t0
            # no loss here: loss.item() would synchronise the device inside the timed loop
            print(f"step={step} elapsed_s={elapsed:.3f} steps_per_s={step / elapsed:.2f}", flush=True)
        if done:
            break
    rt.synchronize()
    end = time.perf_counter()
    res.durations_s[-1] += end - boundary  # the closing synchronize belongs to the last step
    if switch is not None:
        switch.finish()
        trainer.traced = True
    res.last_step_end_epoch = time.time()
    res.final_loss = float(loss.item()) if loss is not None else float("nan")
    return res
