"""A trial's figures combined from its rank records (for :func:`ddpbench.formats.trial_record.build_trial_record`).

``steps_per_s`` is the slowest rank's; ``step_time_ms`` holds the mean over ranks of each rank's statistic, except
``min`` and ``max``: the min and max over ranks (under DDP's all-reduce the ranks' figures differ little).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ddpbench.formats.rank_loop import GPU_TIME_KEYS, STARTUP_PARTS
from ddpbench.formats.rank_record import STEP_STAT_KEYS


def _combine_stats(stats: Sequence[Any]) -> Optional[Dict[str, float]]:
    """The ranks' step statistics (one dict each) combined as the module docstring says; None unless all have them."""
    if not stats or any(not s for s in stats):
        return None
    combine: Dict[str, Callable[[List[float]], float]] = {"min": min, "max": max}
    return {key: combine.get(key, _mean)([float(s[key]) for s in stats]) for key in STEP_STAT_KEYS}


def _mean(values: List[float]) -> float:
    return sum(values) / len(values)


def combine_step_times(ranks: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, float]]:
    """Combine the ranks' ``step_time_ms`` objects as the module docstring says."""
    return _combine_stats([r.get("step_time_ms") for r in ranks])


def wall_decomposition(wall_s: Optional[float], spawn_epoch: float,
                       ranks: Sequence[Mapping[str, Any]]) -> Dict[str, Optional[float]]:
    """``wall_s`` as start-up (spawn to the latest first timed step), training (to the latest end of the timed loop)
    and teardown (the rest: they add up to ``wall_s``), s, from the ranks' epoch timestamps; all None when unknown."""
    unknown: Dict[str, Optional[float]] = dict.fromkeys(("startup_s", "train_s", "teardown_s"))
    try:
        first = max(float(r["timestamps"]["first_step_start"]) for r in ranks)
        last = max(float(r["timestamps"]["last_step_end"]) for r in ranks)
    except (KeyError, TypeError, ValueError):
        return unknown
    if wall_s is None:
        return unknown
    startup, train = first - spawn_epoch, last - first
    return {"startup_s": startup, "train_s": train, "teardown_s": wall_s - startup - train}


def rank_summaries(ranks: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The per-rank part of a trial record."""
    return [{"rank": r.get("rank"), "node_rank": r.get("node_rank"), "hostname": r.get("hostname"),
             "steps": r.get("timed_steps"), "steps_per_s": r.get("steps_per_s"), "train_s": r.get("train_s"),
             "step_time_ms": r.get("step_time_ms")} for r in sorted(ranks, key=lambda r: int(r.get("rank", 0)))]


def throughput(ranks: Sequence[Mapping[str, Any]], global_batch: int) -> Dict[str, Any]:
    """Steps, samples and rates of a finished trial (empty when no rank reported)."""
    if not ranks:
        return {"steps": None, "warmup_steps": None, "samples": None, "steps_per_s": None, "samples_per_s": None}
    slowest = min(float(r["steps_per_s"]) for r in ranks)
    return {"steps": int(min(int(r["timed_steps"]) for r in ranks)),
            "warmup_steps": int(ranks[0].get("warmup_steps", 0)), "samples": sum(int(r["samples"]) for r in ranks),
            "steps_per_s": slowest, "samples_per_s": slowest * global_batch}


def combine_phase_times(ranks: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Dict[str, float]]]:
    """Per phase, the ranks' ``phase_time_ms`` combined like :func:`combine_step_times`; None without phases."""
    phases: List[Any] = [r.get("phase_time_ms") for r in ranks]
    if not phases or any(not p for p in phases):
        return None
    combined = {name: _combine_stats([p.get(name) for p in phases]) for name in phases[0]}
    return {name: stats for name, stats in combined.items() if stats is not None}


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
    combined: Dict[str, Any] = {key: _combine_stats([g.get(key) for g in gpu]) for key in GPU_TIME_KEYS}
    if any(stats is None for stats in combined.values()):
        return None
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
