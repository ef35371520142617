"""Rank record schema: the ``rank-<global rank>.json`` file each workload rank writes.

The workload harness (:mod:`ddpbench.workload.record`) writes one record per rank into
``--metrics-dir`` after the rank has finished its timed loop; the trial code reads
them back. This module is the code of record for the format; ``docs/formats.md``
describes the same fields for humans. It must stay import-light (no torch): the
workload imports it at start-up.

Version history (bump :data:`SCHEMA_VERSION` on any change a reader could notice; list the required
fields a version adds in :data:`ADDED_FIELDS` so records of earlier versions stay valid, and give
:data:`FORMAT` the step that upgrades the previous version):

- 1 (ddpbench 0.1.0): first version.
- 2: several workloads, loaders and timing modes. New required fields ``workload``, ``data``,
  ``timing``, ``phase_time_ms`` (null unless ``timing`` is ``phase``) and ``memory`` (peak host
  RSS and peak CUDA memory allocated). :func:`validate_rank_record` accepts version 1 records
  as they are; :func:`upgrade_rank_record` gives a version 1 record the version 2 fields.
  Records a user's own script writes through ``ddpbench.workload.recorder`` have
  ``data.loader`` :data:`OWN_LOADER` (``workers`` null when unknown) and may have a null ``final_loss``.
- 3: within-trial switching (``switching=blocks``). New required fields ``switching`` (the settings, see
  :data:`ddpbench.formats.switching.SWITCHING_KEYS`) and ``blocks`` (per block: side, steps, wash-out, mean
  and median step, :data:`ddpbench.formats.switching.BLOCK_KEYS`), both null when the trial did not switch.
- 4: the loop and the device (:mod:`ddpbench.formats.rank_loop`). New required fields ``host_sync`` (the job's
  host-sync pattern), ``gpu_time_ms`` (GPU-busy and GPU-idle ms per step; null on CPU), ``startup_s`` (the rank's
  start-up in parts; null outside ddpbench's loop) and ``gc`` (the collector in the timed loop; null outside
  ddpbench's loop); ``inject`` adds ``device_step_ms`` and ``device_cycles_per_ms``. Optional
  ``gpu_busy_times_ms``, ``gpu_idle_times_ms`` (every timed step, with ``--save-step-times``). An earlier record
  is read with ``host_sync`` ``none`` (``own`` for a user's script), the others null, no device wait.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, Final, Mapping, TypeGuard

from ddpbench.formats.rank_loop import check_loop, loop_of_v3
from ddpbench.formats.rank_workload import (DATA_KEYS, LOADERS, MEMORY_KEYS, OWN_LOADER, PHASES, TIMINGS, check_v2,
                                            v1_to_v2)
from ddpbench.formats.reader import Format
from ddpbench.formats.switching import check_blocks

SCHEMA: Final[str] = "ddpbench.rank"
"""Value of the record's ``schema`` field."""

SCHEMA_VERSION: Final[int] = 4
"""Value of the ``schema_version`` field of the records the workload writes now."""

STEP_STAT_KEYS: Final[tuple[str, ...]] = (
    "mean",
    "median",
    "p10",
    "p90",
    "p99",
    "min",
    "max",
    "stdev",
)
"""Keys of ``step_time_ms``: statistics of the timed steps in milliseconds."""

TIMESTAMP_KEYS: Final[tuple[str, ...]] = (
    "process_start",
    "pg_ready",
    "first_step_start",
    "last_step_end",
    "exit",
)
"""Keys of ``timestamps``: Unix epoch seconds (float), in increasing order."""

STOP_REASONS: Final[tuple[str, ...]] = ("steps", "duration", "duration_unsynced")
"""Allowed ``stop_reason`` values."""

DEVICES: Final[tuple[str, ...]] = ("cpu", "cuda")
BACKENDS: Final[tuple[str, ...]] = ("gloo", "nccl")
PRECISIONS: Final[tuple[str, ...]] = ("fp32", "bf16", "fp16")
TRACEML_MODES: Final[tuple[str, ...]] = ("auto", "manual")
PEAK_MEMORY_KINDS: Final[tuple[str, ...]] = ("cuda_max_allocated", "max_rss")

INJECT_KEYS: Final[tuple[str, ...]] = ("step_ms", "startup_s", "teardown_s")
"""Keys of ``inject``: the calibration costs applied (ms per timed step, s, s)."""

# Field name -> (accepted Python types, may be null). ``bool`` is excluded from
# ``int``/``float`` fields explicitly in :func:`_type_problem`.
_INT = (int,)
_NUM = (int, float)
_STR = (str,)
FIELDS: Final[dict[str, tuple[tuple[type, ...], bool]]] = {
    "schema": (_STR, False),
    "schema_version": (_INT, False),
    "rank": (_INT, False),
    "local_rank": (_INT, False),
    "world_size": (_INT, False),
    "node_rank": (_INT, False),
    "hostname": (_STR, False),
    "pid": (_INT, False),
    "device": (_STR, False),
    "backend": (_STR, False),
    "precision": (_STR, False),
    "torch_version": (_STR, True),
    "cuda_version": (_STR, True),
    "nccl_version": (_STR, True),
    "gpu_name": (_STR, True),
    "args": ((dict,), False),
    "timestamps": ((dict,), False),
    "warmup_steps": (_INT, False),
    "timed_steps": (_INT, False),
    "samples": (_INT, False),
    "train_s": (_NUM, False),
    "steps_per_s": (_NUM, False),
    "samples_per_s": (_NUM, False),
    "step_time_ms": ((dict,), False),
    "final_loss": (_NUM, True),
    "peak_memory_bytes": (_INT, False),
    "peak_memory_kind": (_STR, False),
    "stop_reason": (_STR, False),
    "traceml": ((dict,), False),
    "inject": ((dict,), False),
}
"""Required fields: name -> (accepted JSON-decoded types, nullable)."""

FIELDS_V2: Final[dict[str, tuple[tuple[type, ...], bool]]] = {
    "workload": (_STR, False),
    "data": ((dict,), False),
    "timing": (_STR, False),
    "phase_time_ms": ((dict,), True),
    "memory": ((dict,), False),
}
"""Fields required from version 2 on, beside :data:`FIELDS`."""

FIELDS_V3: Final[dict[str, tuple[tuple[type, ...], bool]]] = {"switching": ((dict,), True), "blocks": ((list,), True)}
"""Fields required from version 3 on: within-trial switching's settings and blocks (null when not switching)."""

FIELDS_V4: Final[dict[str, tuple[tuple[type, ...], bool]]] = {
    "host_sync": (_STR, False), "gpu_time_ms": ((dict,), True), "startup_s": ((dict,), True), "gc": ((dict,), True),
}
"""Fields required from version 4 on: the loop's host-sync pattern, the GPU split, the start-up split, the collector."""

ADDED_FIELDS: Final[dict[int, dict[str, tuple[tuple[type, ...], bool]]]] = {2: FIELDS_V2, 3: FIELDS_V3, 4: FIELDS_V4}
"""Required fields added after version 1: version -> {name: (types, nullable)}. A record of version v
must hold :data:`FIELDS` and the fields every version <= v added."""

OPTIONAL_FIELDS: Final[dict[str, tuple[tuple[type, ...], bool]]] = {
    "step_times_ms": ((list,), False),
    "cpu_affinity": ((list,), False),
    "tool": ((dict,), False),
    "ray_startup_s": (_NUM, False),
    "gpu_busy_times_ms": ((list,), False),
    "gpu_idle_times_ms": ((list,), False),
}
"""Fields that may be absent: ``step_times_ms`` (every timed step in ms, ``--save-step-times``),
``cpu_affinity`` (the CPU numbers the rank could run on after pinning itself, where the OS tells), ``tool``
(``{package, module, version, imported, file}``: the mode's tool as this rank's interpreter has it) and
``ray_startup_s`` (a Ray Train worker's: seconds from the Ray Train driver's start to this worker's
training loop: connecting to Ray, starting the worker group, Ray's process group); ``gpu_busy_times_ms`` and
``gpu_idle_times_ms`` (v4, CUDA, ``--save-step-times``: each timed step's GPU-busy and GPU-idle ms)."""


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


def _is_number(value: Any) -> TypeGuard[float]:
    """True for a finite int/float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_types(obj: Mapping[str, Any]) -> list[str]:
    """Presence and type of every required and optional top-level field."""
    problems: list[str] = []
    version = obj.get("schema_version")
    required = dict(FIELDS)
    for added_in, fields in ADDED_FIELDS.items():
        if isinstance(version, int) and version >= added_in:
            required.update(fields)
    for name, (types, nullable) in required.items():
        if name not in obj:
            problems.append(f"{name}: missing")
            continue
        problem = _type_problem(name, obj[name], types, nullable)
        if problem:
            problems.append(problem)
    for name, (types, nullable) in OPTIONAL_FIELDS.items():
        if name in obj:
            problem = _type_problem(name, obj[name], types, nullable)
            if problem:
                problems.append(problem)
    return problems


def _check_number_map(name: str, value: Any, keys: tuple[str, ...]) -> list[str]:
    """``value`` must be a dict holding a finite number under each of ``keys``."""
    if not isinstance(value, dict):
        return []  # already reported by _check_types
    return [f"{name}.{key}: missing or not a finite number" for key in keys if not _is_number(value.get(key))]


def _check_placement(obj: Mapping[str, Any]) -> list[str]:
    """Placement and enumerated string fields."""
    problems: list[str] = []
    rank, world = obj.get("rank"), obj.get("world_size")
    if _is_number(rank) and _is_number(world) and not (world >= 1 and 0 <= rank < world):
        problems.append(f"rank: {rank} not in [0, world_size={world})")
    for name, allowed in (
        ("device", DEVICES),
        ("backend", BACKENDS),
        ("precision", PRECISIONS),
        ("stop_reason", STOP_REASONS),
        ("peak_memory_kind", PEAK_MEMORY_KINDS),
    ):
        if isinstance(obj.get(name), str) and obj[name] not in allowed:
            problems.append(f"{name}: {obj[name]!r} not one of {allowed}")
    return problems


def _check_timestamps(value: Any) -> list[str]:
    """All five epoch timestamps present and non-decreasing."""
    problems = _check_number_map("timestamps", value, TIMESTAMP_KEYS)
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
    if _is_number(timed) and timed < 1:
        problems.append(f"timed_steps: must be >= 1, got {timed}")
    if _is_number(warmup) and warmup < 0:
        problems.append(f"warmup_steps: must be >= 0, got {warmup}")
    args = obj.get("args")
    batch = args.get("batch_size") if isinstance(args, dict) else None
    if _is_number(timed) and _is_number(samples) and _is_number(batch) and samples != timed * batch:
        problems.append(f"samples: {samples} != timed_steps * batch_size ({timed} * {batch})")
    steps = obj.get("step_times_ms")
    if isinstance(steps, list):
        if _is_number(timed) and len(steps) != timed:
            problems.append(f"step_times_ms: {len(steps)} entries, timed_steps is {timed}")
        if not all(_is_number(x) and x >= 0 for x in steps):
            problems.append("step_times_ms: every entry must be a finite number >= 0")
    return problems


def _check_nested(obj: Mapping[str, Any]) -> list[str]:
    """``step_time_ms``, ``inject`` and ``traceml`` sub-objects."""
    problems = _check_number_map("step_time_ms", obj.get("step_time_ms"), STEP_STAT_KEYS)
    problems += _check_number_map("inject", obj.get("inject"), INJECT_KEYS)
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


def _check(obj: dict[str, Any]) -> list[str]:
    """Every problem of the body of a record of a known version (see :func:`validate_rank_record`)."""
    problems = _check_types(obj)
    problems += _check_placement(obj)
    problems += _check_timestamps(obj.get("timestamps"))
    problems += _check_counts(obj)
    problems += _check_nested(obj)
    version = obj.get("schema_version")
    if isinstance(version, int) and version >= 2:
        problems += check_v2(obj, STEP_STAT_KEYS)
    if isinstance(version, int) and version >= 3:
        problems += check_blocks(obj.get("switching"), obj.get("blocks"))
    if isinstance(version, int) and version >= 4:
        problems += check_loop(obj, STEP_STAT_KEYS)
    return problems


def _v2_to_v3(obj: dict[str, Any]) -> dict[str, Any]:
    """Records before version 3 never switched."""
    return {"switching": None, "blocks": None, **obj}


def _v3_to_v4(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, **loop_of_v3(obj)}


FORMAT: Final[Format] = Format(SCHEMA, SCHEMA_VERSION, oldest=1, upgrades={1: v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4},
                               check=_check)
"""The format as the reader contract (:mod:`ddpbench.formats.reader`) reads it."""


def upgrade_rank_record(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a valid record with every current field (an earlier version gets the later versions').

    The copy keeps its ``schema_version``, so a reader can still tell where it came from.
    """
    return FORMAT.upgrade(obj)


def validate_rank_record(obj: Any) -> list[str]:
    """Check a decoded rank record against this schema.

    Pure function: no I/O. Returns one human-readable line per problem; an empty
    list means the record is valid. Unknown extra top-level fields are allowed
    (readers ignore them), missing or mistyped documented fields are not.
    """
    return FORMAT.problems(obj)


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


__all__ = [
    "SCHEMA", "SCHEMA_VERSION", "ADDED_FIELDS", "FIELDS", "FIELDS_V2", "FIELDS_V3", "FIELDS_V4", "OPTIONAL_FIELDS",
    "STEP_STAT_KEYS", "TIMESTAMP_KEYS", "OWN_LOADER", "STOP_REASONS", "INJECT_KEYS", "RANK_RECORD_GLOB",
    "rank_of_record_name", "rank_record_name", "read_rank_record", "validate_rank_record",
    "DATA_KEYS", "LOADERS", "MEMORY_KEYS", "PHASES", "TIMINGS",
]
