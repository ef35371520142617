"""What version 4 of the rank record adds: the job's loop and the device (``host_sync``, ``gpu_time_ms``), the
rank's start-up (``startup_s``) and the collector (``gc``); their values and checks. Import-light (no torch).
"""

from __future__ import annotations

from typing import Any, Final, Mapping, Sequence

from ddpbench.choices import GcMode, HostSyncPattern
from ddpbench.formats.reader import is_number, number_map_problems

HOST_SYNCS: Final[tuple[str, ...]] = tuple(HostSyncPattern)
#: the patterns ddpbench's own loop runs (``--host-sync``): all but ``own``
HARNESS_HOST_SYNCS: Final[tuple[str, ...]] = tuple(p for p in HostSyncPattern if p != HostSyncPattern.own)
#: one phrase per pattern, for the report's setup
HOST_SYNC_TEXT: Final[dict[str, str]] = {
    "none": "no host-device synchronisation inside a timed step (ddpbench's loop; the host runs ahead of the GPU)",
    "loss": "the loss read to the host after every step (one synchronisation per step, at its end)",
    "seed": "the seed script's loop: a device synchronize before every step (its stop check), the host-to-device "
            "copy inside the step marker, the loss read after every step",
    "own": "the job's own loop (a framework Trainer or the user's script): its own synchronisations",
}
#: keys of ``gpu_time_ms`` holding step statistics (ms): GPU-busy and GPU-idle per timed step
GPU_TIME_KEYS: Final[tuple[str, ...]] = ("busy", "idle")
#: keys of ``startup_s`` (s, in order; they add up to ``first_step_start - process_start``): ddpbench's parsing and
#: modules; ``import torch``; the tool's import and init; the CUDA context and torch's threads; the process groups;
#: the model built and wrapped, with its optimizer; the data and its loader; the injected wait (and its device
#: probe); in-process tools started; the warm-up steps and what precedes the first timed step
STARTUP_PARTS: Final[tuple[str, ...]] = (
    "script", "torch_import", "tool_init", "device_init", "process_group", "model", "data", "injected", "tools",
    "warmup",
)
GC_MODES: Final[tuple[str, ...]] = tuple(GcMode)


def check_loop(obj: Mapping[str, Any], stat_keys: Sequence[str]) -> list[str]:
    """Problems of a version 4 record's ``host_sync``, ``gpu_time_ms``, ``startup_s``, ``gc`` and ``inject`` device keys."""
    problems: list[str] = []
    host_sync = obj.get("host_sync")
    if isinstance(host_sync, str) and host_sync not in HOST_SYNCS:
        problems.append(f"host_sync: {host_sync!r} not one of {HOST_SYNCS}")
    gpu = obj.get("gpu_time_ms")
    if isinstance(gpu, dict):
        for key in GPU_TIME_KEYS:
            stats = gpu.get(key)
            problems += (number_map_problems(f"gpu_time_ms.{key}", stats, stat_keys) if isinstance(stats, dict)
                         else [f"gpu_time_ms.{key}: must be an object of step statistics"])
        for key in ("steps", "late_reads"):
            if not (is_number(gpu.get(key)) and gpu[key] >= 0):
                problems.append(f"gpu_time_ms.{key}: must be a number >= 0")
    elif gpu is None and obj.get("device") == "cuda" and obj.get("host_sync") in HARNESS_HOST_SYNCS:
        problems.append("gpu_time_ms: null on a cuda rank of ddpbench's loop")
    startup = obj.get("startup_s")
    if isinstance(startup, dict):
        problems += [f"startup_s.{part}: missing or not a number >= 0" for part in STARTUP_PARTS
                     if not (is_number(startup.get(part)) and startup[part] >= 0)]
    gc = obj.get("gc")
    if isinstance(gc, dict):
        if gc.get("mode") not in GC_MODES:
            problems.append(f"gc.mode: {gc.get('mode')!r} not one of {GC_MODES}")
        collections = gc.get("collections")
        if not (isinstance(collections, list) and len(collections) == 3 and all(is_number(c) for c in collections)):
            problems.append("gc.collections: must be three numbers (generations 0, 1, 2)")
    for key in ("gpu_busy_times_ms", "gpu_idle_times_ms"):
        values = obj.get(key)
        if isinstance(values, list) and not all(is_number(v) and v >= 0 for v in values):
            problems.append(f"{key}: every entry must be a finite number >= 0")
    inject = obj.get("inject")
    if isinstance(inject, dict):
        if not (is_number(inject.get("device_step_ms")) and inject["device_step_ms"] >= 0):
            problems.append("inject.device_step_ms: missing or not a number >= 0")
        per_ms = inject.get("device_cycles_per_ms")
        if per_ms is not None and not (is_number(per_ms) and per_ms > 0):
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
