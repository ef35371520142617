"""A trial's figures combined from its rank records: what :func:`ddpbench.formats.trial_record.build_trial_record` derives.

Combining ranks: ``steps_per_s`` is the slowest rank's; ``step_time_ms`` holds the mean over ranks
of each rank's statistic, except ``min`` and ``max``, which are the min and max over ranks. In DDP
every step waits for the gradient all-reduce, so the ranks' figures differ little.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ddpbench.formats.rank_loop import GPU_TIME_KEYS, STARTUP_PARTS
from ddpbench.formats.rank_record import STEP_STAT_KEYS


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


def combine_gpu_times(ranks: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """The ranks' ``gpu_time_ms`` (GPU-busy and GPU-idle per step) combined like :func:`combine_step_times`, with
    the ``late_reads`` summed; None unless every rank has one."""
    gpu: List[Any] = [r.get("gpu_time_ms") for r in ranks]
    if not gpu or any(not isinstance(g, dict) for g in gpu):
        return None
    combined: Dict[str, Any] = {}
    for key in GPU_TIME_KEYS:
        stats = combine_step_times([{"step_time_ms": g.get(key)} for g in gpu])
        if stats is None:
            return None
        combined[key] = stats
    combined["late_reads"] = int(sum(int(g.get("late_reads") or 0) for g in gpu))
    return combined


def startup_split(ranks: Sequence[Mapping[str, Any]], spawn_epoch: float) -> Optional[Dict[str, float]]:
    """Where the trial's start-up went: the start-up parts of the rank that began timing last (the one that sets
    the trial's ``startup_s``), and ``before_rank``: from the node agent's spawn to that rank's first statement (the
    launcher, a tool's launcher, the interpreter's start). They add up to ``startup_s``. None without the parts."""
    try:
        last = max(ranks, key=lambda r: float(r["timestamps"]["first_step_start"]))
    except (KeyError, TypeError, ValueError):
        return None
    parts = last.get("startup_s")
    if not isinstance(parts, dict):
        return None
    split = {"before_rank": max(0.0, float(last["timestamps"]["process_start"]) - spawn_epoch)}
    split.update({part: float(parts.get(part) or 0.0) for part in STARTUP_PARTS})
    return split
