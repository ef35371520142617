"""The trial record (``trial.json``, schema ``ddpbench.trial``): writer, validator and reader.

Built per trial from the rank records and node entries; read back upgraded in memory from any known version.
Fields and version history: docs/formats.md.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ddpbench.choices import TrialStatus
from ddpbench.formats.condition import NOT_IN_HASH
from ddpbench.formats.footprint import trial_footprint
from ddpbench.formats.rank_combine import (
    combine_gpu_times, combine_phase_times, combine_step_times, peak_memory, rank_summaries, startup_split, throughput,
    wall_decomposition,
)
from ddpbench.formats.reader import Format
from ddpbench.formats.switching import trial_switching

SCHEMA = "ddpbench.trial"
SCHEMA_VERSION = 6
#: the record's file name inside a job dir
TRIAL_FILE = "trial.json"

#: fields a reader needs to pair a trial, with their JSON types
REQUIRED_FIELDS: Dict[str, Tuple[type, ...]] = {
    "sweep_dir": (str,), "mode": (str,), "repeat": (int,), "pair_position": (int,), "condition": (dict,),
    "condition_id": (str,), "status": (str,),
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
    trimmed = {k: v for k, v in config.items() if k not in NOT_IN_HASH}
    return hashlib.sha256(json.dumps(trimmed, sort_keys=True, default=str).encode()).hexdigest()


def node_entry(node_rank: int, hostname: Optional[str], *, wall_s: Optional[float], exit_code: Optional[int],
               spawn_epoch: Optional[float], exit_epoch: Optional[float], killed_by: Optional[str] = None,
               stdout: str = "", stderr: str = "", **extra: Any) -> Dict[str, Any]:
    """One entry of the record's ``nodes`` (and a peer's ``nodes/node<r>.json``): ``wall_s``, the agent's spawn to
    exit, s; epochs in Unix s; ``killed_by`` ``timeout``, ``peer_failed`` or None; ``extra``: ``error`` (a node that
    skipped the trial) or ``source``, ``ranks_span_s`` (a node seen only through its ranks)."""
    return {"node_rank": node_rank, "hostname": hostname, "wall_s": wall_s, "exit_code": exit_code,
            "spawn_epoch": spawn_epoch, "exit_epoch": exit_epoch, "killed_by": killed_by, "stdout": stdout,
            "stderr": stderr, **extra}


def nodes_from_ranks(ranks: Sequence[Mapping[str, Any]], node_ranks: Sequence[int],
                     nproc_per_node: int) -> Dict[int, Dict[str, Any]]:
    """Node entries for nodes whose own record cannot be read, from their ranks' records: ``ranks_span_s``, the
    first rank's start to the last record (a lower bound of the agent's wall), and ``exit_code`` 0 when every rank
    reported; the agent's wall and epochs unknown (null)."""
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


def traceml_section(summary: Optional[Mapping[str, Any]], path: Optional[str]) -> Optional[Dict[str, Any]]:
    """The figures ddpbench keeps from TraceML's ``final_summary.json`` (None when absent)."""
    if summary is None:
        return None if path is None else {"summary_path": path, "steps_analyzed": None,
                                          "step_time_ms": None, "step_time_median_ms": None}
    global_stats = (summary.get("step_time") or {}).get("global") or {}
    window = global_stats.get("window") or {}
    return {"summary_path": path, "steps_analyzed": window.get("steps_analyzed"),
            "step_time_ms": global_stats.get("average"), "step_time_median_ms": global_stats.get("median")}


def build_trial_record(*, meta: Mapping[str, Any], config: Mapping[str, Any], status: TrialStatus, exit_code: Optional[int],
                       error: Optional[str], wall_s: Optional[float], spawn_epoch: float,
                       ranks: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]],
                       traceml: Optional[Mapping[str, Any]], environment: Mapping[str, Any], logs: Mapping[str, Any],
                       attempt: Optional[Mapping[str, Any]] = None, load: Optional[Mapping[str, Any]] = None,
                       metrics: Optional[Mapping[str, Any]] = None,
                       tool: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Assemble a ``trial.json`` payload: ``meta`` holds the identity fields (mode, repeat, dirs...); a None section
    (``attempt``, ``load``, ``metrics``, ``tool``, ``traceml``) is recorded as unknown."""
    cluster = config["cluster"]
    world_size = int(cluster["nnodes"]) * int(cluster["nproc_per_node"])
    measured = status == TrialStatus.ok
    done = ranks if measured else []  # the ranks whose figures count: none unless the trial is ok
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
        **wall_decomposition(wall_s, spawn_epoch, done),
        "world_size": world_size,
        "nnodes": int(cluster["nnodes"]),
        "nproc_per_node": int(cluster["nproc_per_node"]),
        **throughput(done, int(config["model"]["batch_size"]) * world_size),
        "step_time_ms": combine_step_times(done),
        "final_loss": rank0.get("final_loss") if measured and rank0 else None,
        "peak_memory_bytes": max((int(r.get("peak_memory_bytes") or 0) for r in done), default=None),
        "ranks": rank_summaries(ranks),
        "nodes": list(nodes),
        "traceml": dict(traceml) if traceml is not None else None,
        "environment": dict(environment),
        "logs": dict(logs),
        "workload": rank0.get("workload") if rank0 else None,
        "timing": rank0.get("timing") if rank0 else None,
        "phase_time_ms": combine_phase_times(done),
        "memory": peak_memory(done),
        "attempt": dict(attempt) if attempt is not None else None,
        "load": dict(load) if load is not None else None,
        "metrics": dict(metrics) if metrics is not None else None,
        "tool": dict(tool) if tool is not None else None,
        "ray_startup_s": max(  # Ray's start-up of a Ray Train trial: the largest of its ranks' (s)
            (float(r["ray_startup_s"]) for r in done if r.get("ray_startup_s") is not None), default=None),
        "switching": trial_switching(done),
        "host_sync": rank0.get("host_sync") if rank0 else (config.get("workload") or {}).get("host_sync"),
        "gpu_time_ms": combine_gpu_times(done),
        "startup_split_s": startup_split(done, spawn_epoch),
        "gc": rank0.get("gc") if measured and rank0 else None,
        "footprint": trial_footprint(nodes, ranks),
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
    if record["status"] == TrialStatus.ok:
        numeric = OK_NUMERIC_FIELDS if record.get("ranks") else OK_NUMERIC_FIELDS_WITHOUT_RANKS
        bad = [k for k in numeric
               if not isinstance(record.get(k), (int, float)) or isinstance(record.get(k), bool)]
        if bad:
            return ["status ok but not a number: " + ", ".join(bad)]
    return []


def _v1_to_v2(record: Dict[str, Any]) -> Dict[str, Any]:
    return {**dict.fromkeys(ADDED_IN_V2), **record}


def _v2_to_v3(record: Dict[str, Any]) -> Dict[str, Any]:
    config = record.get("config")
    mode = config.get("mode") if isinstance(config, dict) else None
    if isinstance(config, dict) and isinstance(mode, dict) and "role" not in mode:
        return {**record, "config": {**config, "mode": {**mode, "role": _role_of_old_mode(record["mode"])}}}
    return record


def _v3_to_v4(record: Dict[str, Any]) -> Dict[str, Any]:
    return {"arm": None, "ray_startup_s": None, "switching": None, **record}


def _v4_to_v5(record: Dict[str, Any]) -> Dict[str, Any]:
    config = record.get("config")
    workload = config.get("workload") if isinstance(config, dict) else None
    own = isinstance(workload, dict) and (workload.get("path") is not None or workload.get("framework") is not None)
    return {"host_sync": "own" if own else "none", "gpu_time_ms": None, "startup_split_s": None, "gc": None, **record}


def _v5_to_v6(record: Dict[str, Any]) -> Dict[str, Any]:
    return {"footprint": None, **record}


#: the format as the reader contract (:mod:`ddpbench.formats.reader`) reads it
FORMAT = Format(SCHEMA, SCHEMA_VERSION, oldest=1, upgrades={1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5,
                                                                   5: _v5_to_v6},
                check=_check)
#: why a decoded ``trial.json`` of any known version cannot be used (one line; extra fields are allowed), or None
validate_trial_record = FORMAT.first_problem
#: ``(record, None)`` for a usable ``trial.json`` of any known version, upgraded; else ``(None, why)``
read_trial_record = FORMAT.read_problem


def _role_of_old_mode(name: str) -> str:
    """The role a record written before modes declared one had: the only place a mode's name is read for it."""
    if name.startswith("inject"):
        return "calibration"
    if name.endswith("_aa"):
        return "aa"
    return "baseline" if name == "native" else "tool"
