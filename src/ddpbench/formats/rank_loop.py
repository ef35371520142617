"""What version 4 of the rank record adds: how the job's loop met the device, and where the rank's start-up went.

Import-light (no torch): the workload imports it at start-up. :mod:`ddpbench.formats.rank_record` holds the format
(fields, version history, upgrade steps); this module holds the values and the checks of the version 4 fields:

- ``host_sync``: the job's host-sync pattern (:data:`HOST_SYNCS`; ``ddpbench.workload.host_sync``);
- ``gpu_time_ms``: per timed step, GPU-busy and GPU-idle ms from CUDA events at the step's device boundaries
  (:data:`GPU_TIME_KEYS`, each with the step statistics; ``steps`` read, ``late_reads``); null on CPU;
- ``startup_s``: the rank's start-up, from its first statement to its first timed step, in consecutive parts
  (:data:`STARTUP_PARTS`, s); null when the rank's loop is not ddpbench's (a framework Trainer, a user script);
- ``gc``: Python's garbage collector in the timed loop (:data:`GC_MODES`, and the collections per generation).
"""

from __future__ import annotations

import math
from typing import Any, Final, Mapping, Sequence

from ddpbench.choices import GcMode, HostSyncPattern

HOST_SYNCS: Final[tuple[str, ...]] = tuple(HostSyncPattern)
"""Allowed ``host_sync`` values: the harness's patterns (:data:`HARNESS_HOST_SYNCS`) and ``own``."""

HARNESS_HOST_SYNCS: Final[tuple[str, ...]] = tuple(p for p in HostSyncPattern if p != HostSyncPattern.own)
"""The patterns ddpbench's own loop runs (``--host-sync``)."""

HOST_SYNC_TEXT: Final[dict[str, str]] = {
    "none": "no host-device synchronisation inside a timed step (ddpbench's loop; the host runs ahead of the GPU)",
    "loss": "the loss read to the host after every step (one synchronisation per step, at its end)",
    "seed": "the seed script's loop: a device synchronize before every step (its stop check), the host-to-device "
            "copy inside the step marker, the loss read after every step",
    "own": "the job's own loop (a framework Trainer or the user's script): its own synchronisations",
}
"""One phrase per pattern, for the report's setup."""

GPU_TIME_KEYS: Final[tuple[str, ...]] = ("busy", "idle")
"""Keys of ``gpu_time_ms`` holding step statistics (ms): GPU-busy and GPU-idle per timed step."""

STARTUP_PARTS: Final[tuple[str, ...]] = (
    "script", "torch_import", "tool_init", "device_init", "process_group", "model", "data", "injected", "tools",
    "warmup",
)
"""Keys of ``startup_s`` (s, in order; they add up to ``timestamps.first_step_start - timestamps.process_start``):
ddpbench's argument parsing and its own modules; ``import torch``; the tool's import and init in the rank
(TraceML's ``init``; 0 natively); the device (CUDA context) and torch's threads; the process group(s); the model
built, moved and wrapped in DDP (NCCL's communicator starts at DDP's first broadcast) with its optimizer; the data
set and its loader; the injected start-up wait (calibration; also its device-wait probe); in-process tools
started (torch.profiler, W&B); the warm-up steps and what precedes the first timed step."""

GC_MODES: Final[tuple[str, ...]] = tuple(GcMode)
"""``gc.mode``: Python's collector as it is (``on``), ``gc.freeze()`` before the timed loop (start-up's objects
are never scanned again), or disabled for the timed loop (``off``)."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _stats_problems(name: str, value: Any, stat_keys: Sequence[str]) -> list[str]:
    if not isinstance(value, dict):
        return [f"{name}: must be an object of step statistics"]
    return [f"{name}.{key}: missing or not a finite number" for key in stat_keys if not _number(value.get(key))]


def check_loop(obj: Mapping[str, Any], stat_keys: Sequence[str]) -> list[str]:
    """Problems of a version 4 record's ``host_sync``, ``gpu_time_ms``, ``startup_s``, ``gc`` and ``inject`` device keys."""
    problems: list[str] = []
    host_sync = obj.get("host_sync")
    if isinstance(host_sync, str) and host_sync not in HOST_SYNCS:
        problems.append(f"host_sync: {host_sync!r} not one of {HOST_SYNCS}")
    gpu = obj.get("gpu_time_ms")
    if isinstance(gpu, dict):
        for key in GPU_TIME_KEYS:
            problems += _stats_problems(f"gpu_time_ms.{key}", gpu.get(key), stat_keys)
        for key in ("steps", "late_reads"):
            if not (_number(gpu.get(key)) and gpu[key] >= 0):
                problems.append(f"gpu_time_ms.{key}: must be a number >= 0")
    elif gpu is None and obj.get("device") == "cuda" and obj.get("host_sync") in HARNESS_HOST_SYNCS:
        problems.append("gpu_time_ms: null on a cuda rank of ddpbench's loop")
    startup = obj.get("startup_s")
    if isinstance(startup, dict):
        problems += [f"startup_s.{part}: missing or not a number >= 0" for part in STARTUP_PARTS
                     if not (_number(startup.get(part)) and startup[part] >= 0)]
    gc = obj.get("gc")
    if isinstance(gc, dict):
        if gc.get("mode") not in GC_MODES:
            problems.append(f"gc.mode: {gc.get('mode')!r} not one of {GC_MODES}")
        collections = gc.get("collections")
        if not (isinstance(collections, list) and len(collections) == 3 and all(_number(c) for c in collections)):
            problems.append("gc.collections: must be three numbers (generations 0, 1, 2)")
    for key in ("gpu_busy_times_ms", "gpu_idle_times_ms"):
        values = obj.get(key)
        if isinstance(values, list) and not all(_number(v) and v >= 0 for v in values):
            problems.append(f"{key}: every entry must be a finite number >= 0")
    inject = obj.get("inject")
    if isinstance(inject, dict):
        if not (_number(inject.get("device_step_ms")) and inject["device_step_ms"] >= 0):
            problems.append("inject.device_step_ms: missing or not a number >= 0")
        per_ms = inject.get("device_cycles_per_ms")
        if per_ms is not None and not (_number(per_ms) and per_ms > 0):
            problems.append("inject.device_cycles_per_ms: must be null or a number > 0")
    return problems


def loop_of_v3(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The version 4 fields of a record written before them: its loop synchronised nothing inside a step when it was
    ddpbench's, else it was the job's own (``data.loader`` ``own``); no GPU split, start-up split or gc record."""
    data = obj.get("data")
    own = isinstance(data, dict) and data.get("loader") == "own"
    inject = obj.get("inject")
    upgraded_inject = {**inject, "device_step_ms": 0.0, "device_cycles_per_ms": None} if isinstance(inject, dict) else inject
    return {"host_sync": "own" if own else "none", "gpu_time_ms": None, "startup_s": None, "gc": None,
            "inject": upgraded_inject}
