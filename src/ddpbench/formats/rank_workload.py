"""What version 2 of the rank record adds (:mod:`ddpbench.formats.rank_record` holds the format): the workload, how
it was fed and timed, its memory; their check and the step that upgrades a version 1 record. Import-light (no torch).
"""

from __future__ import annotations

from typing import Any, Final, Mapping, Sequence

from ddpbench.choices import Loader, Timing
from ddpbench.formats.reader import is_number, number_map_problems

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


def check_v2(obj: Mapping[str, Any], stat_keys: Sequence[str]) -> list[str]:
    """Version 2's ``workload``, ``data``, ``timing``, ``phase_time_ms`` and ``memory`` (``stat_keys``: the step statistics)."""
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
            problems += number_map_problems(f"phase_time_ms.{phase}", phases.get(phase, {}), stat_keys)
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


def v1_to_v2(obj: dict[str, Any]) -> dict[str, Any]:
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
