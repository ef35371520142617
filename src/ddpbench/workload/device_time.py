"""The device side of the timed loop on CUDA (nothing here runs on CPU): GPU-busy and GPU-idle ms per step
(:class:`DeviceStepClock`; its events, what busy and idle mean and what it costs: docs/gpu.md,
``benchmarks/gpu_clock_cost.py``) and a device-side wait of known length (:class:`DeviceWait`, calibration)."""

from __future__ import annotations

import functools
import statistics
from typing import Any, Callable, Optional

from ddpbench.choices import Device

RING = 64
"""Event pairs in the clock's ring: the events of step k are read at the end of step k + RING - 2."""

PROBE_CYCLES = 4_000_000
"""Cycles of each probe sleep of :func:`cycles_per_ms` (about 2 ms at 2 GHz)."""

PROBES = 5
"""Probe sleeps timed by :func:`cycles_per_ms`; their median is the answer."""


class DeviceStepClock:
    """Per timed step, GPU-busy ms (its ``start`` event to its ``end``) and GPU-idle ms (the previous ``end`` to its
    ``start``) from two CUDA events recorded at the step's first and last device work, read ``ring`` - 2 steps late."""

    def __init__(self, ring: int = RING, new_event: Optional[Callable[[], Any]] = None) -> None:
        """``ring`` event pairs; ``new_event`` makes one timing event (default: ``torch.cuda.Event(enable_timing=True)``)."""
        if ring < 3:
            raise ValueError("ring must hold at least 3 steps")
        if new_event is None:
            import torch

            new_event = functools.partial(torch.cuda.Event, enable_timing=True)

        self.ring = ring
        self.starts = [new_event() for _ in range(ring)]
        self.ends = [new_event() for _ in range(ring)]
        # steps whose start and end events were recorded (the current step's start may be recorded too)
        self.steps = 0
        # steps read back so far
        self.read = 0
        # per read step, ms
        self.busy_ms: list[float] = []
        self.idle_ms: list[float] = []
        # reads that found the step's end event not yet complete and waited for it
        self.late_reads = 0

    def start(self) -> None:
        """The loop's opening boundary (after its synchronize): the end of "step 0"."""
        self.ends[0].record()

    def step_begins(self) -> None:
        """Just before the current step's first device work."""
        self.starts[(self.steps + 1) % self.ring].record()

    def step_ends(self) -> None:
        """Just after the current step's last device work."""
        self.steps += 1
        self.ends[self.steps % self.ring].record()

    def _read_until(self, last: int) -> None:
        while self.read < last:
            step = self.read + 1
            slot, before = step % self.ring, (step - 1) % self.ring
            end = self.ends[slot]
            if not end.query():
                end.synchronize()
                self.late_reads += 1
            self.idle_ms.append(self.ends[before].elapsed_time(self.starts[slot]))
            self.busy_ms.append(self.starts[slot].elapsed_time(end))
            self.read = step

    def collect(self) -> None:
        """Read the steps old enough that their events are free to be recorded again soon (once per step)."""
        self._read_until(self.steps - self.ring + 2)

    def finish(self) -> None:
        """After the loop's closing synchronize: read every step not read yet."""
        self._read_until(self.steps)

    def record(self) -> dict[str, Any]:
        """The rank record's ``gpu_time_ms`` (statistics in ms; see :mod:`ddpbench.formats.rank_loop`)."""
        from ddpbench.workload.timing import step_time_stats

        return {"busy": step_time_stats([ms / 1000.0 for ms in self.busy_ms]),
                "idle": step_time_stats([ms / 1000.0 for ms in self.idle_ms]),
                "steps": len(self.busy_ms), "late_reads": self.late_reads}


def step_clock(device: str) -> Optional[DeviceStepClock]:
    """A step clock on CUDA; None on CPU (no events, nothing per step)."""
    return DeviceStepClock() if device == Device.cuda else None


def cycles_per_ms(probe_cycles: int = PROBE_CYCLES, probes: int = PROBES) -> float:
    """GPU clock cycles per ms of ``torch.cuda._sleep``, timed with CUDA events here and now (median of ``probes``)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(probe_cycles)  # the first launch pays for loading the kernel
    samples = []
    for _ in range(probes):
        start.record()
        torch.cuda._sleep(probe_cycles)
        end.record()
        end.synchronize()
        samples.append(probe_cycles / start.elapsed_time(end))
    return float(statistics.median(samples))


class DeviceWait:
    """The calibration's injected device work: ``ms`` of GPU time per call, a spin kernel (``torch.cuda._sleep``)
    sized from the cycles per ms measured in this process after the warm-up."""

    def __init__(self, ms: float, per_ms: float) -> None:
        # the wait asked for, ms
        self.ms = ms
        # GPU cycles per ms, measured at start-up
        self.cycles_per_ms = per_ms
        # cycles each call spins
        self.cycles = max(1, int(round(ms * per_ms)))

    def __call__(self) -> None:
        import torch

        torch.cuda._sleep(self.cycles)

