"""Where a trial's time goes beside the headline: per step on the host and the GPU (ms; CUDA only), and its
start-up in parts (s). :func:`loop_of` says what kind of loop the baseline ran, for the calibration. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ddpbench.analysis.figures import finite, step_ms
from ddpbench.analysis.results import FigureGroup, FigureRow
from ddpbench.analysis.rows import Sides, both_have, column, figure_row
from ddpbench.analysis.stats import mean
from ddpbench.formats.rank_loop import HOST_SYNC_TEXT, STARTUP_PARTS

#: a loop whose GPU idles at least this share of the baseline's step is host-bound: the GPU waits for the host
HOST_BOUND_IDLE_SHARE = 0.05
#: host-sync patterns that make the host wait for each step's device work (host and GPU serialised per step)
SYNCHRONISED = ("seed", "loss")
#: ``startup_split_s`` key -> the row's name
STARTUP_LABELS = {
    "before_rank": "before the rank (launcher, tool launcher)", "script": "ddpbench's arguments and modules",
    "torch_import": "import torch", "tool_init": "tool init in the rank", "device_init": "CUDA context",
    "process_group": "process group", "model": "model + DDP (NCCL init)", "data": "data set + loader",
    "injected": "injected (calibration)", "tools": "in-process tools", "warmup": "warm-up steps",
}


def gpu_rows(sides: Sides, confidence: float) -> tuple[FigureRow, ...]:
    """Host step, GPU busy and GPU idle, mean ms per step, where both sides of a pair have the GPU split; () else."""
    if not both_have(sides, "gpu_busy_ms_mean"):
        return ()
    whole = mean([step_ms(b) or math.nan for b, _ in sides])
    return (
        figure_row(FigureGroup.gpu, "host step", "ms", sides, step_ms, confidence),
        figure_row(FigureGroup.gpu, "GPU busy", "ms", sides, column("gpu_busy_ms_mean"), confidence, whole),
        figure_row(FigureGroup.gpu, "GPU idle", "ms", sides, column("gpu_idle_ms_mean"), confidence, whole),
    )


def startup_rows(sides: Sides, confidence: float) -> tuple[FigureRow, ...]:
    """Each start-up part (s per trial) where both sides of a pair have the split; () else."""
    if not both_have(sides, "startup_before_rank_s"):
        return ()
    return tuple(figure_row(FigureGroup.startup, STARTUP_LABELS[key], "s", sides, column(f"startup_{key}_s"), confidence)
                 for key in ("before_rank", *STARTUP_PARTS))


@dataclass(frozen=True)
class Loop:
    """What the baseline's trials of a comparison were, for the calibration: see :func:`loop_of`."""

    # the host-sync pattern (None when unknown or mixed), and whether the trials measured the GPU split (CUDA)
    host_sync: str | None
    gpu: bool
    # the baseline's mean GPU idle per step, as a share of its mean host step and in ms (None without the split)
    idle_share: float | None
    idle_ms: float | None

    @property
    def synchronised(self) -> bool:
        """The host waits for every step's device work (host and GPU serialised)."""
        return self.host_sync in SYNCHRONISED

    @property
    def host_bound(self) -> bool | None:
        """The GPU waits for the host part of every step (None without the GPU split)."""
        return None if self.idle_share is None else self.idle_share >= HOST_BOUND_IDLE_SHARE

    def describe(self) -> str:
        """One phrase: the loop as the calibration reads it."""
        if not self.gpu:
            return "a CPU loop"
        idle = f"the GPU idles {self.idle_ms:.3g} ms ({100 * (self.idle_share or 0):.0f} %) of each step"
        if self.synchronised:
            return f"a loop synchronised every step (host_sync={self.host_sync}; {idle})"
        return f"a {'host' if self.host_bound else 'GPU'}-bound loop without per-step synchronisation ({idle})"


def loop_of(base_rows: Sequence[Mapping[str, Any]]) -> Loop:
    """The :class:`Loop` of a comparison's baseline trials."""
    syncs = {str(r.get("host_sync")) for r in base_rows if isinstance(r.get("host_sync"), str)}
    idle = [v for v in (finite(r.get("gpu_idle_ms_mean")) for r in base_rows) if v is not None]
    steps = [v for v in (step_ms(r) for r in base_rows if finite(r.get("gpu_idle_ms_mean")) is not None) if v]
    idle_ms = mean(idle) if idle else None
    share = idle_ms / mean(steps) if idle_ms is not None and steps and mean(steps) > 0 else None
    return Loop(host_sync=syncs.pop() if len(syncs) == 1 else None, gpu=bool(idle), idle_share=share, idle_ms=idle_ms)


def host_sync_text(value: str) -> str:
    """The report's phrase for a host-sync pattern (the value itself when unknown)."""
    return HOST_SYNC_TEXT.get(value, value)
