"""The trial record (``trial.json``, schema ``ddpbench.trial``): writer, validator and reader.

The driver builds one record per trial (:func:`build_trial_record`, from the rank records and the
node entries, each built by :func:`node_entry`); the collector and resume read it back through
:func:`read_trial_record`, which accepts every version listed below and upgrades it in memory to
the current one. ``docs/formats.md`` describes the fields for humans.

Version history (bump :data:`SCHEMA_VERSION` on any change a reader could notice, and give
:data:`FORMAT` the step that turns the previous version into the new one):

- 1 (ddpbench 0.1.0): first version.
- 2: what else the trial shows. New fields, each null when unknown (a version 1 record is upgraded
  with every one of them null): ``workload`` and ``timing`` (from rank 0's record), ``phase_time_ms``
  (per phase, combined over ranks like ``step_time_ms``; null unless ``timing`` is ``phase``),
  ``memory`` (``host_peak_rss_bytes`` and ``cuda_peak_allocated_bytes``: the largest rank's),
  ``attempt`` (``{number, dir}``: which attempt of the trial this is and the folder holding its rank
  records, logs and tool output), ``load`` (what else ran during the trial: see
  :data:`LOAD_KEYS`), ``metrics`` (figures read from the workload's output: name ->
  ``{value, unit, source}``) and ``tool`` (the tool's own output: ``{name, artifacts, bytes,
  usable, problem}``).

- 3: ``config.mode`` declares the mode's ``role`` (:data:`MODE_ROLES`) and its needs
  (``needs_shared_dir``, ``attach``); a version 2 or earlier record is read with the role its mode's
  name implied then (the only place a mode's name is interpreted).
- 4: ``switching``: within-trial switching's settings, the blocks (slowest rank's mean and median ms per
  block) and the trial's estimate (:func:`ddpbench.formats.switching.trial_switching`); null when not switching.

Combining ranks: ``steps_per_s`` is the slowest rank's; ``step_time_ms`` holds the mean over ranks
of each rank's statistic, except ``min`` and ``max``, which are the min and max over ranks. In DDP
every step waits for the gradient all-reduce, so the ranks' figures differ little.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ddpbench.formats.condition import SWEEPER_KEYS
from ddpbench.formats.rank_record import STEP_STAT_KEYS
from ddpbench.formats.reader import Format
from ddpbench.formats.switching import trial_switching

SCHEMA = "ddpbench.trial"
SCHEMA_VERSION = 4
#: the record's file name inside a job dir
TRIAL_FILE = "trial.json"
STATUSES = ("ok", "failed", "timeout")
#: what a mode is to the analysis (``config.mode.role``, declared by each mode): compared against, judged
#: against the budget, the baseline again (noise floor), known injected costs
MODE_ROLES = ("baseline", "tool", "aa", "calibration")
#: an attempt's folder of node records, one per node that node 0 reads (``nodes/node<r>.json``)
NODES_DIR = "nodes"

#: fields a reader needs to pair a trial, with their JSON types
REQUIRED_FIELDS: Dict[str, Tuple[type, ...]] = {
    "sweep_dir": (str,),
    "mode": (str,),
    "repeat": (int,),
    "pair_position": (int,),
    "condition": (dict,),
    "condition_id": (str,),
    "status": (str,),
}
#: fields version 2 adds; each may be null (unknown), and a version 1 record is upgraded with all null
ADDED_IN_V2 = ("workload", "timing", "phase_time_ms", "memory", "attempt", "load", "metrics", "tool")
#: keys of ``load``: CPUs of the machine, CPUs the ranks were pinned to (null = not pinned), the
#: 1-minute load average at start and end, CPU seconds used by processes outside the trial's tree,
#: CPU steal seconds (null where the kernel does not report it), the affinity setting used
LOAD_KEYS = ("n_cpus", "own_cpus", "load1_start", "load1_end", "foreign_cpu_s", "steal_s", "cpu_affinity")
#: figures an ``ok`` record must hold as numbers
OK_NUMERIC_FIELDS = ("wall_s", "startup_s", "train_s", "teardown_s", "steps_per_s")
#: the one figure an ``ok`` record of a user's own script without rank records (``ranks`` empty) must hold:
#: its decomposition and rates are unknown (null), its figures are in ``metrics``
OK_NUMERIC_FIELDS_WITHOUT_RANKS = ("wall_s",)


def config_hash(config: Mapping[str, Any]) -> str:
    """sha256 of a resolved config, ignoring the keys that do not change what a trial measures."""
    trimmed = {k: v for k, v in config.items() if k not in SWEEPER_KEYS}
    return hashlib.sha256(json.dumps(trimmed, sort_keys=True, default=str).encode()).hexdigest()


def combine_step_times(ranks: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, float]]:
    """Combine the ranks' ``step_time_ms`` objects as the module docstring says."""
    stats: List[Any] = [r.get("step_time_ms") for r in ranks]
    if not stats or any(not s for s in stats):
        return None
    combined: Dict[str, float] = {}
    for key in STEP_STAT_KEYS:
        values = [float(s[key]) for s in stats]
        if key == "min":
            combined[key] = min(values)
        elif key == "max":
            combined[key] = max(values)
        else:
            combined[key] = sum(values) / len(values)
    return combined


def wall_decomposition(
    wall_s: float, spawn_epoch: float, ranks: Sequence[Mapping[str, Any]]
) -> Dict[str, Optional[float]]:
    """Split ``wall_s`` into start-up, training and teardown from the ranks' epoch timestamps.

    startup = spawn -> latest first timed step; train = that -> latest end of the timed loop;
    teardown = the rest, so the three add up to ``wall_s`` exactly.
    """
    try:
        first = max(float(r["timestamps"]["first_step_start"]) for r in ranks)
        last = max(float(r["timestamps"]["last_step_end"]) for r in ranks)
    except (KeyError, TypeError, ValueError):
        return {"startup_s": None, "train_s": None, "teardown_s": None}
    if not ranks:
        return {"startup_s": None, "train_s": None, "teardown_s": None}
    startup = first - spawn_epoch
    train = last - first
    return {"startup_s": startup, "train_s": train, "teardown_s": wall_s - startup - train}


def node_entry(
    node_rank: int,
    hostname: Optional[str],
    *,
    wall_s: Optional[float],
    exit_code: Optional[int],
    spawn_epoch: Optional[float],
    exit_epoch: Optional[float],
    killed_by: Optional[str] = None,
    stdout: str = "",
    stderr: str = "",
    **extra: Any,
) -> Dict[str, Any]:
    """One entry of the record's ``nodes`` list (and of a peer's ``nodes/node<r>.json``).

    ``wall_s``: the node agent's spawn-to-exit wall, s; epochs are Unix seconds; ``killed_by`` is
    ``timeout``/``peer_failed``/None; ``extra`` adds ``error`` (a node that skipped the trial) or
    ``source``/``ranks_span_s`` (a node seen only through its ranks).
    """
    return {"node_rank": node_rank, "hostname": hostname, "wall_s": wall_s, "exit_code": exit_code,
            "spawn_epoch": spawn_epoch, "exit_epoch": exit_epoch, "killed_by": killed_by, "stdout": stdout,
            "stderr": stderr, **extra}


def node_record_path(attempt_dir: "str | os.PathLike[str]", node_rank: int) -> Path:
    """Node ``node_rank``'s record (a :func:`node_entry`) in an attempt's folder: ``nodes/node<r>.json``."""
    return Path(attempt_dir) / NODES_DIR / f"node{int(node_rank)}.json"


def node_log_path(logs_dir: "str | os.PathLike[str]", node_rank: int, stream: str) -> Path:
    """Node ``node_rank``'s agent log of ``stream`` (``stdout`` or ``stderr``) in a logs folder: ``node<r>.<stream>.log``."""
    return Path(logs_dir) / f"node{int(node_rank)}.{stream}.log"


def nodes_from_ranks(
    ranks: Sequence[Mapping[str, Any]], node_ranks: Sequence[int], nproc_per_node: int
) -> Dict[int, Dict[str, Any]]:
    """Node entries for nodes whose own record cannot be read, inferred from their ranks' records.

    The agent's wall time, exit code and spawn/exit epochs are unknown (null); ``ranks_span_s`` is
    the span from the node's first rank process start to its last record (a lower bound of the
    agent's wall, on that node's clock). ``exit_code`` is 0 when every rank of the node reported.
    """
    entries: Dict[int, Dict[str, Any]] = {}
    for node_rank in node_ranks:
        mine = [r for r in ranks if int(r.get("node_rank", -1)) == node_rank]
        if not mine:
            continue
        starts = [float(r["timestamps"]["process_start"]) for r in mine]
        ends = [float(r["timestamps"]["exit"]) for r in mine]
        entries[node_rank] = node_entry(
            node_rank, mine[0].get("hostname"), wall_s=None,
            exit_code=0 if len(mine) >= nproc_per_node else None, spawn_epoch=None, exit_epoch=None,
            source="ranks", ranks_span_s=max(ends) - min(starts),
        )
    return entries


def rank_summaries(ranks: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The per-rank part of a trial record."""
    return [
        {
            "rank": r.get("rank"),
            "node_rank": r.get("node_rank"),
            "hostname": r.get("hostname"),
            "steps": r.get("timed_steps"),
            "steps_per_s": r.get("steps_per_s"),
            "train_s": r.get("train_s"),
            "step_time_ms": r.get("step_time_ms"),
        }
        for r in sorted(ranks, key=lambda r: int(r.get("rank", 0)))
    ]


def throughput(ranks: Sequence[Mapping[str, Any]], global_batch: int) -> Dict[str, Any]:
    """Steps, samples and rates of a finished trial (empty when no rank reported)."""
    if not ranks:
        return {"steps": None, "warmup_steps": None, "samples": None, "steps_per_s": None, "samples_per_s": None}
    slowest = min(float(r["steps_per_s"]) for r in ranks)
    return {
        "steps": int(min(int(r["timed_steps"]) for r in ranks)),
        "warmup_steps": int(ranks[0].get("warmup_steps", 0)),
        "samples": int(sum(int(r["samples"]) for r in ranks)),
        "steps_per_s": slowest,
        "samples_per_s": slowest * global_batch,
    }


def traceml_section(summary: Optional[Mapping[str, Any]], path: Optional[str]) -> Optional[Dict[str, Any]]:
    """The figures ddpbench keeps from TraceML's ``final_summary.json`` (None when absent)."""
    if summary is None:
        return None if path is None else {"summary_path": path, "steps_analyzed": None,
                                          "step_time_ms": None, "step_time_median_ms": None}
    global_stats = (summary.get("step_time") or {}).get("global") or {}
    window = global_stats.get("window") or {}
    return {
        "summary_path": path,
        "steps_analyzed": window.get("steps_analyzed"),
        "step_time_ms": global_stats.get("average"),
        "step_time_median_ms": global_stats.get("median"),
    }


def combine_phase_times(ranks: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Dict[str, float]]]:
    """Per phase, the ranks' ``phase_time_ms`` combined like :func:`combine_step_times`; None without phases."""
    phases: List[Any] = [r.get("phase_time_ms") for r in ranks]
    if not phases or any(not p for p in phases):
        return None
    combined: Dict[str, Dict[str, float]] = {}
    for name in phases[0]:
        per_rank = [{"step_time_ms": p.get(name)} for p in phases]
        stats = combine_step_times(per_rank)
        if stats is not None:
            combined[name] = stats
    return combined


def peak_memory(ranks: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Optional[int]]]:
    """The largest rank's peak host RSS and peak CUDA memory allocated, bytes; None without ranks."""
    if not ranks:
        return None
    peaks: Dict[str, Optional[int]] = {}
    for key in ("host_peak_rss_bytes", "cuda_peak_allocated_bytes"):
        values = [int(v) for v in ((r.get("memory") or {}).get(key) for r in ranks) if v is not None]
        peaks[key] = max(values) if values else None
    return peaks


def rank_consistency_error(ranks: Sequence[Mapping[str, Any]], world_size: int) -> Optional[str]:
    """Why the rank records of an exited trial do not make an ok trial, or None."""
    if len(ranks) != world_size:
        return f"{len(ranks)} of {world_size} ranks wrote a rank record"
    steps = {int(r["timed_steps"]) for r in ranks}
    if len(steps) != 1:
        return f"ranks ran different step counts: {sorted(steps)}"
    return None


def build_trial_record(
    *,
    meta: Mapping[str, Any],
    config: Mapping[str, Any],
    status: str,
    exit_code: Optional[int],
    error: Optional[str],
    wall_s: Optional[float],
    spawn_epoch: float,
    ranks: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    traceml: Optional[Mapping[str, Any]],
    environment: Mapping[str, Any],
    logs: Mapping[str, Any],
    attempt: Optional[Mapping[str, Any]] = None,
    load: Optional[Mapping[str, Any]] = None,
    metrics: Optional[Mapping[str, Any]] = None,
    tool: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """Assemble a ``trial.json`` payload. ``meta`` holds the identity fields (mode, repeat, dirs...).

    ``attempt``, ``load``, ``metrics`` and ``tool`` are the version 2 sections (see the module doc);
    None records them as unknown.
    """
    assert status in STATUSES, status
    cluster = config["cluster"]
    world_size = int(cluster["nnodes"]) * int(cluster["nproc_per_node"])
    measured = status == "ok"
    decomposition = (
        wall_decomposition(wall_s, spawn_epoch, ranks)
        if measured and wall_s is not None
        else {"startup_s": None, "train_s": None, "teardown_s": None}
    )
    rates = throughput(ranks if measured else [], int(config["model"]["batch_size"]) * world_size)
    rank0 = next((r for r in ranks if int(r.get("rank", -1)) == 0), None)
    record: Dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        **meta,
        "config": dict(config),
        "config_hash": config_hash(config),
        "status": status,
        "exit_code": exit_code,
        "error": error,
        "wall_s": wall_s,
        **decomposition,
        "world_size": world_size,
        "nnodes": int(cluster["nnodes"]),
        "nproc_per_node": int(cluster["nproc_per_node"]),
        **rates,
        "step_time_ms": combine_step_times(ranks) if measured else None,
        "final_loss": rank0.get("final_loss") if measured and rank0 else None,
        "peak_memory_bytes": max((int(r.get("peak_memory_bytes") or 0) for r in ranks), default=None) if measured else None,
        "ranks": rank_summaries(ranks),
        "nodes": list(nodes),
        "traceml": dict(traceml) if traceml is not None else None,
        "environment": dict(environment),
        "logs": dict(logs),
        "workload": rank0.get("workload") if rank0 else None,
        "timing": rank0.get("timing") if rank0 else None,
        "phase_time_ms": combine_phase_times(ranks) if measured else None,
        "memory": peak_memory(ranks) if measured else None,
        "attempt": dict(attempt) if attempt is not None else None,
        "load": dict(load) if load is not None else None,
        "metrics": dict(metrics) if metrics is not None else None,
        "tool": dict(tool) if tool is not None else None,
        "switching": trial_switching(ranks) if measured else None,
    }
    return record


def _check(record: Dict[str, Any]) -> List[str]:
    """The fields pairing needs and, for an ``ok`` record, that its figures are numbers (the first problem)."""
    missing = [k for k in REQUIRED_FIELDS if k not in record]
    if missing:
        return ["partial record: missing " + ", ".join(missing)]
    for key, types in REQUIRED_FIELDS.items():
        value = record[key]
        if not isinstance(value, types) or isinstance(value, bool):
            return [f"field {key!r} has type {type(value).__name__}"]
    if record["status"] == "ok":
        numeric = OK_NUMERIC_FIELDS if record.get("ranks") else OK_NUMERIC_FIELDS_WITHOUT_RANKS
        bad = [k for k in numeric
               if not isinstance(record.get(k), (int, float)) or isinstance(record.get(k), bool)]
        if bad:
            return ["status ok but not a number: " + ", ".join(bad)]
    return []


def _v1_to_v2(record: Dict[str, Any]) -> Dict[str, Any]:
    return {**{key: None for key in ADDED_IN_V2}, **record}


def _v2_to_v3(record: Dict[str, Any]) -> Dict[str, Any]:
    config = record.get("config")
    mode = config.get("mode") if isinstance(config, dict) else None
    if isinstance(config, dict) and isinstance(mode, dict) and "role" not in mode:
        return {**record, "config": {**config, "mode": {**mode, "role": _role_of_old_mode(record["mode"])}}}
    return record


def _v3_to_v4(record: Dict[str, Any]) -> Dict[str, Any]:
    return {"switching": None, **record}


#: the format as the reader contract (:mod:`ddpbench.formats.reader`) reads it
FORMAT = Format(SCHEMA, SCHEMA_VERSION, oldest=1, upgrades={1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}, check=_check)


def validate_trial_record(record: Any) -> Optional[str]:
    """Why a decoded ``trial.json`` of any known version cannot be used (one line), or None when it can.

    Unknown extra fields are allowed.
    """
    problems = FORMAT.problems(record)
    return problems[0] if problems else None


def _role_of_old_mode(name: str) -> str:
    """The role a record written before modes declared one had: the only place a mode's name is read for it."""
    if name.startswith("inject"):
        return "calibration"
    if name.endswith("_aa"):
        return "aa"
    return "baseline" if name == "native" else "tool"


def read_trial_record(path: "str | os.PathLike[str]") -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """``(record, None)`` for a usable ``trial.json`` of any known version, upgraded; else ``(None, why)``."""
    record, error = FORMAT.read(path)
    return record, (error.problem if error is not None else None)
