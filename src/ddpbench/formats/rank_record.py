"""Rank record schema: the ``rank-<global rank>.json`` each workload rank writes after its timed loop. Import-light
(no torch): the workload imports it. Fields and version history: docs/formats.md; a change a reader could notice
bumps :data:`SCHEMA_VERSION`, lists its new required fields in :data:`ADDED_FIELDS` and adds the upgrade step.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, Final, Mapping

from ddpbench.choices import Device, DistBackend, Loader, Precision, StopKind, Timing
from ddpbench.formats.rank_loop import check_loop, loop_of_v3
from ddpbench.formats.reader import Format, is_number, number_map_problems
from ddpbench.formats.switching import check_blocks

#: value of the record's ``schema`` field, and the ``schema_version`` the workload writes now
SCHEMA: Final[str] = "ddpbench.rank"
SCHEMA_VERSION: Final[int] = 5
#: keys of ``step_time_ms``: statistics of the timed steps in milliseconds
STEP_STAT_KEYS: Final[tuple[str, ...]] = ("mean", "median", "p10", "p90", "p99", "min", "max", "stdev")
#: keys of ``timestamps``: Unix epoch seconds (float), in increasing order
TIMESTAMP_KEYS: Final[tuple[str, ...]] = ("process_start", "pg_ready", "first_step_start", "last_step_end", "exit")
#: allowed ``stop_reason`` values
STOP_REASONS: Final[tuple[str, ...]] = (*StopKind, "duration_unsynced")
TRACEML_MODES: Final[tuple[str, ...]] = ("auto", "manual")
#: the enumerated string fields and their allowed values (a rank runs on a resolved device and backend: no ``auto``)
CHOICE_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "device": tuple(d for d in Device if d != Device.auto),
    "backend": tuple(b for b in DistBackend if b != DistBackend.auto),
    "precision": tuple(Precision),
    "stop_reason": STOP_REASONS,
    "peak_memory_kind": ("cuda_max_allocated", "max_rss"),
}
#: keys of ``inject``: the calibration costs applied (ms per timed step, s, s)
INJECT_KEYS: Final[tuple[str, ...]] = ("step_ms", "startup_s", "teardown_s")
# what version 2 adds: the workload, how it was fed and timed, its memory (``workload``, ``data``, ``timing``,
# ``phase_time_ms``, ``memory``)
LOADERS: Final[tuple[str, ...]] = tuple(Loader)
TIMINGS: Final[tuple[str, ...]] = tuple(Timing)
#: ``data.loader`` of a record a user's own script writes (``ddpbench.workload.recorder``): its own loader, not one
#: of :data:`LOADERS`; its ``workers`` may be null (unknown)
OWN_LOADER: Final[str] = "own"
#: keys of ``phase_time_ms`` (``timing`` = ``phase``), each holding step statistics in ms: waiting for the next
#: batch, host-to-device copy, zero_grad + forward + loss, backward, optimizer step (+ scaler update), and the rest
#: of the step (step marker, stop check, injected cost, loop bookkeeping)
PHASES: Final[tuple[str, ...]] = ("data_wait", "h2d", "forward", "backward", "optimizer", "other")
#: keys of ``data``: loader kind, worker processes per rank (0 = in the training process), batches prefetched per
#: worker (null without workers), pinned host memory
DATA_KEYS: Final[tuple[str, ...]] = ("loader", "workers", "prefetch_factor", "pin_memory")
#: keys of ``memory``, bytes, read after the timed loop: the rank process's peak RSS (not its loader workers') and
#: ``torch.cuda.max_memory_allocated`` (null on CPU)
MEMORY_KEYS: Final[tuple[str, ...]] = ("host_peak_rss_bytes", "cuda_peak_allocated_bytes")

# the accepted types of a field (a bool is never an int or a float: :func:`_type_problem`)
_INT = (int,)
_NUM = (int, float)
_STR = (str,)
#: required fields: name -> (accepted JSON-decoded types, nullable)
FIELDS: Final[dict[str, tuple[tuple[type, ...], bool]]] = {
    "schema": (_STR, False), "schema_version": (_INT, False),
    "rank": (_INT, False), "local_rank": (_INT, False), "world_size": (_INT, False), "node_rank": (_INT, False),
    "hostname": (_STR, False), "pid": (_INT, False),
    "device": (_STR, False), "backend": (_STR, False), "precision": (_STR, False),
    "torch_version": (_STR, True), "cuda_version": (_STR, True), "nccl_version": (_STR, True),
    "gpu_name": (_STR, True),
    "args": ((dict,), False), "timestamps": ((dict,), False),
    "warmup_steps": (_INT, False), "timed_steps": (_INT, False), "samples": (_INT, False),
    "train_s": (_NUM, False), "steps_per_s": (_NUM, False), "samples_per_s": (_NUM, False),
    "step_time_ms": ((dict,), False), "final_loss": (_NUM, True),
    "peak_memory_bytes": (_INT, False), "peak_memory_kind": (_STR, False),
    "stop_reason": (_STR, False), "traceml": ((dict,), False), "inject": ((dict,), False),
}
#: fields required from version 2 on, beside :data:`FIELDS`
FIELDS_V2: Final[dict[str, tuple[tuple[type, ...], bool]]] = {
    "workload": (_STR, False), "data": ((dict,), False), "timing": (_STR, False), "phase_time_ms": ((dict,), True),
    "memory": ((dict,), False),
}
#: required fields added after version 1: version -> {name: (types, nullable)}; a record of version v must hold
#: :data:`FIELDS` and the fields every version <= v added (3: within-trial switching, null when not switching;
#: 4: the loop's host-sync pattern, the GPU split, the start-up split, the collector; 5: the timed steps' CPU time)
ADDED_FIELDS: Final[dict[int, dict[str, tuple[tuple[type, ...], bool]]]] = {
    2: FIELDS_V2,
    3: {"switching": ((dict,), True), "blocks": ((list,), True)},
    4: {"host_sync": (_STR, False), "gpu_time_ms": ((dict,), True), "startup_s": ((dict,), True),
        "gc": ((dict,), True)},
    5: {"timed_cpu_s": ((dict,), True)},
}
#: keys of ``timed_cpu_s`` (version 5): the rank process's CPU seconds over its timed steps (user, system, their
#: sum) and that sum in ms per timed step
TIMED_CPU_KEYS: Final[tuple[str, ...]] = ("user", "system", "total", "per_step_ms")
#: fields that may be absent (docs/formats.md)
OPTIONAL_FIELDS: Final[dict[str, tuple[tuple[type, ...], bool]]] = {
    "step_times_ms": ((list,), False), "cpu_affinity": ((list,), False), "tool": ((dict,), False),
    "ray_startup_s": (_NUM, False), "gpu_busy_times_ms": ((list,), False), "gpu_idle_times_ms": ((list,), False),
}


def _type_problem(name: str, value: Any, types: tuple[type, ...], nullable: bool) -> str | None:
    """Return a one-line problem when ``value`` is not of ``types`` (bools never count as numbers)."""
    if value is None:
        return None if nullable else f"{name}: must not be null"
    if isinstance(value, bool) and bool not in types:
        return f"{name}: expected {'/'.join(t.__name__ for t in types)}, got bool"
    if not isinstance(value, types):
        return f"{name}: expected {'/'.join(t.__name__ for t in types)}, got {type(value).__name__}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name}: must be finite, got {value!r}"
    return None


def _check_types(obj: Mapping[str, Any]) -> list[str]:
    """Presence and type of every required and optional top-level field."""
    version = obj.get("schema_version")
    required = dict(FIELDS)
    for added_in, fields in ADDED_FIELDS.items():
        if isinstance(version, int) and version >= added_in:
            required.update(fields)
    problems: list[str | None] = []
    for name, (types, nullable) in {**required, **OPTIONAL_FIELDS}.items():
        if name in obj:
            problems.append(_type_problem(name, obj[name], types, nullable))
        elif name in required:
            problems.append(f"{name}: missing")
    return [problem for problem in problems if problem]


def _check_placement(obj: Mapping[str, Any]) -> list[str]:
    """Placement and enumerated string fields."""
    problems: list[str] = []
    rank, world = obj.get("rank"), obj.get("world_size")
    if is_number(rank) and is_number(world) and not (world >= 1 and 0 <= rank < world):
        problems.append(f"rank: {rank} not in [0, world_size={world})")
    for name, allowed in CHOICE_FIELDS.items():
        if isinstance(obj.get(name), str) and obj[name] not in allowed:
            problems.append(f"{name}: {obj[name]!r} not one of {allowed}")
    return problems


def _check_timestamps(value: Any) -> list[str]:
    """All five epoch timestamps present and non-decreasing."""
    problems = number_map_problems("timestamps", value, TIMESTAMP_KEYS)
    if problems or not isinstance(value, dict):
        return problems
    for earlier, later in zip(TIMESTAMP_KEYS, TIMESTAMP_KEYS[1:]):
        if value[later] < value[earlier]:
            problems.append(f"timestamps: {later} ({value[later]}) before {earlier} ({value[earlier]})")
    return problems


def _check_counts(obj: Mapping[str, Any]) -> list[str]:
    """Step and sample counts are consistent with each other."""
    problems: list[str] = []
    timed, warmup, samples = obj.get("timed_steps"), obj.get("warmup_steps"), obj.get("samples")
    if is_number(timed) and timed < 1:
        problems.append(f"timed_steps: must be >= 1, got {timed}")
    if is_number(warmup) and warmup < 0:
        problems.append(f"warmup_steps: must be >= 0, got {warmup}")
    args = obj.get("args")
    batch = args.get("batch_size") if isinstance(args, dict) else None
    if is_number(timed) and is_number(samples) and is_number(batch) and samples != timed * batch:
        problems.append(f"samples: {samples} != timed_steps * batch_size ({timed} * {batch})")
    steps = obj.get("step_times_ms")
    if isinstance(steps, list):
        if is_number(timed) and len(steps) != timed:
            problems.append(f"step_times_ms: {len(steps)} entries, timed_steps is {timed}")
        if not all(is_number(x) and x >= 0 for x in steps):
            problems.append("step_times_ms: every entry must be a finite number >= 0")
    return problems


def _check_nested(obj: Mapping[str, Any]) -> list[str]:
    """``step_time_ms``, ``inject`` and ``traceml`` sub-objects."""
    problems = number_map_problems("step_time_ms", obj.get("step_time_ms"), STEP_STAT_KEYS)
    problems += number_map_problems("inject", obj.get("inject"), INJECT_KEYS)
    traceml = obj.get("traceml")
    if isinstance(traceml, dict):
        if not isinstance(traceml.get("active"), bool):
            problems.append("traceml.active: missing or not a bool")
        mode = traceml.get("mode")
        if mode is not None and mode not in TRACEML_MODES:
            problems.append(f"traceml.mode: {mode!r} not one of {TRACEML_MODES} or null")
        if traceml.get("active") is True and mode is None:
            problems.append("traceml.mode: null while traceml.active is true")
    return problems


def _check_v2(obj: Mapping[str, Any]) -> list[str]:
    """Version 2's ``workload``, ``data``, ``timing``, ``phase_time_ms`` and ``memory``."""
    problems: list[str] = []
    timing, data, phases, memory = obj.get("timing"), obj.get("data"), obj.get("phase_time_ms"), obj.get("memory")
    if isinstance(obj.get("workload"), str) and not obj["workload"]:
        problems.append("workload: must not be empty")
    if isinstance(timing, str) and timing not in TIMINGS:
        problems.append(f"timing: {timing!r} not one of {TIMINGS}")
    if isinstance(data, dict):
        problems += [f"data.{key}: missing" for key in DATA_KEYS if key not in data]
        own = data.get("loader") == OWN_LOADER
        if "loader" in data and data["loader"] not in LOADERS and not own:
            problems.append(f"data.loader: {data['loader']!r} not one of {LOADERS + (OWN_LOADER,)}")
        if "workers" in data and not (is_number(data["workers"]) and data["workers"] >= 0) \
                and not (own and data["workers"] is None):
            problems.append("data.workers: must be an integer >= 0")
    if timing == "phase" and not isinstance(phases, dict):
        problems.append("phase_time_ms: must be an object when timing is 'phase'")
    if timing == "step" and phases is not None:
        problems.append("phase_time_ms: must be null when timing is 'step'")
    if isinstance(phases, dict):
        for phase in PHASES:
            problems += number_map_problems(f"phase_time_ms.{phase}", phases.get(phase, {}), STEP_STAT_KEYS)
    if isinstance(memory, dict):
        problems += [f"memory.{key}: missing" for key in MEMORY_KEYS if key not in memory]
        rss, cuda = memory.get("host_peak_rss_bytes"), memory.get("cuda_peak_allocated_bytes")
        if "host_peak_rss_bytes" in memory and not (is_number(rss) and rss > 0):
            problems.append("memory.host_peak_rss_bytes: must be a number > 0")
        if cuda is not None and not (is_number(cuda) and cuda >= 0):
            problems.append("memory.cuda_peak_allocated_bytes: must be null or a number >= 0")
        if obj.get("device") == "cuda" and cuda is None:
            problems.append("memory.cuda_peak_allocated_bytes: null on a cuda rank")
    return problems


def _v1_to_v2(obj: dict[str, Any]) -> dict[str, Any]:
    """Version 1 records come from the MLP with the synthetic loader and step timing; their one peak
    memory figure (``peak_memory_kind``) becomes the matching ``memory`` key, the other is null."""
    record = dict(obj)
    kind, peak = record.get("peak_memory_kind"), record.get("peak_memory_bytes")
    record.setdefault("workload", "mlp")
    record.setdefault("data", {"loader": "synthetic", "workers": 0, "prefetch_factor": None,
                               "pin_memory": record.get("device") == "cuda"})
    record.setdefault("timing", "step")
    record.setdefault("phase_time_ms", None)
    record.setdefault("memory", {"host_peak_rss_bytes": peak if kind == "max_rss" else None,
                                 "cuda_peak_allocated_bytes": peak if kind == "cuda_max_allocated" else None})
    return record


def _check(obj: dict[str, Any]) -> list[str]:
    """Every problem of the body of a record of a known version (see :func:`validate_rank_record`)."""
    problems = _check_types(obj)
    problems += _check_placement(obj)
    problems += _check_timestamps(obj.get("timestamps"))
    problems += _check_counts(obj)
    problems += _check_nested(obj)
    version = obj.get("schema_version")
    if isinstance(version, int) and version >= 2:
        problems += _check_v2(obj)
    if isinstance(version, int) and version >= 3:
        problems += check_blocks(obj.get("switching"), obj.get("blocks"))
    if isinstance(version, int) and version >= 4:
        problems += check_loop(obj, STEP_STAT_KEYS)
    if isinstance(version, int) and version >= 5:
        problems += number_map_problems("timed_cpu_s", obj.get("timed_cpu_s"), TIMED_CPU_KEYS)
    return problems


def _v2_to_v3(obj: dict[str, Any]) -> dict[str, Any]:
    """Records before version 3 never switched."""
    return {"switching": None, "blocks": None, **obj}


def _v3_to_v4(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, **loop_of_v3(obj)}


def _v4_to_v5(obj: dict[str, Any]) -> dict[str, Any]:
    """Records before version 5 did not measure their timed steps' CPU time."""
    return {"timed_cpu_s": None, **obj}


#: the format as the reader contract (:mod:`ddpbench.formats.reader`) reads it
FORMAT: Final[Format] = Format(SCHEMA, SCHEMA_VERSION, oldest=1,
                               upgrades={1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5}, check=_check)
#: a copy of a valid record with every current field (``schema_version`` kept)
upgrade_rank_record = FORMAT.upgrade
#: one line per problem of a decoded rank record (no I/O); empty when it is valid (unknown extra fields are allowed)
validate_rank_record = FORMAT.problems

#: the glob that matches every rank record in a metrics folder
RANK_RECORD_GLOB = "rank-*.json"
_RANK_RECORD_NAME = re.compile(r"rank-(\d+)\.json")


def rank_record_name(rank: int) -> str:
    """The file name of rank ``rank``'s record in a metrics folder: ``rank-<rank>.json``."""
    return f"rank-{int(rank)}.json"


def rank_of_record_name(name: str) -> int | None:
    """The rank whose record file is called ``name``, or None when ``name`` is no rank record's."""
    match = _RANK_RECORD_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def read_rank_record(path: "str | os.PathLike[str]") -> tuple[dict[str, Any] | None, list[str]]:
    """``(record, [])`` for a valid rank record of any known version, upgraded; ``(None, problems)`` otherwise."""
    record, error = FORMAT.read(path)
    return record, (error.problems if error is not None else [])

