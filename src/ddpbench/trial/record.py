"""The trial record (``trial.json``, schema ``ddpbench.trial``): pure construction from measurements.

Version history:
- 1 (ddpbench 0.1.0): first version. Fields are documented in docs/formats.md.

Combining ranks: ``steps_per_s`` is the slowest rank's; ``step_time_ms`` holds the mean over ranks
of each rank's statistic, except ``min`` and ``max``, which are the min and max over ranks. In DDP
every step waits for the gradient all-reduce, so the ranks' figures differ little.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

SCHEMA = "ddpbench.trial"
SCHEMA_VERSION = 1
STEP_STATS = ("mean", "median", "p10", "p90", "p99", "min", "max", "stdev")
STATUSES = ("ok", "failed", "timeout")


def config_hash(config: Mapping[str, Any]) -> str:
    """sha256 of a resolved config, ignoring the keys that do not change what a trial measures."""
    trimmed = {k: v for k, v in config.items() if k not in ("pair_position", "sweep_name")}
    return hashlib.sha256(json.dumps(trimmed, sort_keys=True, default=str).encode()).hexdigest()


def combine_step_times(ranks: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, float]]:
    """Combine the ranks' ``step_time_ms`` objects as the module docstring says."""
    stats = [r.get("step_time_ms") for r in ranks]
    if not stats or any(not s for s in stats):
        return None
    combined: Dict[str, float] = {}
    for key in STEP_STATS:
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
) -> Dict[str, Any]:
    """Assemble a ``trial.json`` payload. ``meta`` holds the identity fields (mode, repeat, dirs...)."""
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
    }
    return record
