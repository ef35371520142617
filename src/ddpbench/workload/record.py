"""The rank record a rank writes after its timed loop (format: :mod:`ddpbench.formats.rank_record`), written
atomically as ``rank-<global rank>.json``; with ``--gather-metrics`` rank 0 writes every rank's."""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any

from ddpbench.choices import Device, Timing
from ddpbench.formats.rank_record import PHASES, SCHEMA, SCHEMA_VERSION, rank_record_name
from ddpbench.io import write_json_atomic
from ddpbench.workload.args import RankArgs
from ddpbench.workload.device_time import DeviceWait
from ddpbench.workload.loop import LoopResult
from ddpbench.workload.runtime import Runtime
from ddpbench.workload.timing import phase_stats, step_time_stats


def peak_memory(device: str) -> dict[str, int | None]:
    """The rank record's ``memory``: this process's peak RSS and CUDA peak allocated (null on CPU), bytes."""
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    cuda: int | None = None
    if device == Device.cuda:
        import torch

        cuda = int(torch.cuda.max_memory_allocated())
    return {"host_peak_rss_bytes": int(rss if sys.platform == "darwin" else rss * 1024), "cuda_peak_allocated_bytes": cuda}


def _versions(rt: Runtime) -> dict[str, str | None]:
    """torch/CUDA/NCCL versions and GPU name, null when absent."""
    import torch

    cuda = torch.version.cuda if torch.cuda.is_available() else None
    nccl: str | None = None
    gpu: str | None = None
    if rt.device == Device.cuda:
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)
        except Exception:  # noqa: BLE001 - a missing NCCL is reported as null
            nccl = None
        gpu = torch.cuda.get_device_name(rt.torch_device)
    return {"torch_version": torch.__version__, "cuda_version": cuda, "nccl_version": nccl, "gpu_name": gpu}


def tool_record() -> dict[str, Any] | None:
    """The mode's tool as this rank has it (``DDPBENCH_TOOL_PACKAGE``/``_MODULE``): the version of the distribution
    the imported module's file belongs to (else the first on sys.path), whether it is imported, its file."""
    from importlib import metadata

    package = os.environ.get("DDPBENCH_TOOL_PACKAGE")
    if not package:
        return None
    module_name = os.environ.get("DDPBENCH_TOOL_MODULE") or None
    module = sys.modules.get(module_name) if module_name else None
    try:
        version: str | None = metadata.version(package)
    except metadata.PackageNotFoundError:
        version = None
    where = os.path.realpath(str(getattr(module, "__file__", "") or ""))
    wanted = package.lower().replace("_", "-")
    for dist in metadata.distributions() if where else ():
        home = os.path.realpath(str(dist.locate_file("")))
        if (dist.metadata["Name"] or "").lower().replace("_", "-") == wanted and where.startswith(home + os.sep) \
                and any(os.path.realpath(str(dist.locate_file(f))) == where for f in dist.files or []):
            version = dist.version
            break
    return {"package": package, "module": module_name, "version": version, "imported": module is not None,
            "file": getattr(module, "__file__", None)}


def build_record(
    args: RankArgs[Any], rt: Runtime, res: LoopResult, *, workload: str, data: dict[str, Any],
    process_start_epoch: float, pg_ready_epoch: float, traceml_active: bool, stop_reason: str,
    startup: dict[str, float] | None = None, device_wait: DeviceWait | None = None,
) -> dict[str, Any]:
    """The rank JSON (fields: docs/formats.md). ``startup``: the start-up parts (s; None outside ddpbench's loop);
    ``device_wait``: the injected device wait, if any."""
    timed = len(res.durations_s)
    train_s = res.last_step_end_epoch - res.first_step_start_epoch
    train_s = train_s if train_s > 0 else sum(res.durations_s)
    samples = timed * args.batch_size
    memory = peak_memory(rt.device)
    on_cuda = memory["cuda_peak_allocated_bytes"] is not None
    phases = phase_stats(PHASES, res.durations_s, res.phases_s) if args.timing == Timing.phase else None
    record: dict[str, Any] = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
        "rank": rt.rank, "local_rank": rt.local_rank, "world_size": rt.world_size, "node_rank": rt.node_rank,
        "hostname": socket.gethostname(), "pid": os.getpid(),
        "device": rt.device, "backend": rt.backend, "precision": rt.precision,
        "workload": workload, "data": data, "timing": args.timing,
        **_versions(rt),
        "args": args.as_dict(),
        "timestamps": {
            "process_start": process_start_epoch, "pg_ready": pg_ready_epoch,
            "first_step_start": res.first_step_start_epoch, "last_step_end": res.last_step_end_epoch,
            "exit": time.time(),
        },
        "warmup_steps": args.warmup_steps, "timed_steps": timed, "samples": samples, "train_s": train_s,
        "steps_per_s": timed / train_s, "samples_per_s": samples / train_s,
        "step_time_ms": step_time_stats(res.durations_s), "phase_time_ms": phases,
        "final_loss": res.final_loss,
        "memory": memory,
        "peak_memory_bytes": memory["cuda_peak_allocated_bytes" if on_cuda else "host_peak_rss_bytes"],
        "peak_memory_kind": "cuda_max_allocated" if on_cuda else "max_rss",
        "stop_reason": stop_reason,
        "traceml": {"active": traceml_active, "mode": args.traceml_mode if traceml_active else None},
        "inject": {
            "step_ms": args.inject_step_ms, "startup_s": args.inject_startup_sec,
            "teardown_s": args.inject_teardown_sec,
            "device_step_ms": device_wait.ms if device_wait is not None else 0.0,
            "device_cycles_per_ms": device_wait.cycles_per_ms if device_wait is not None else None,
            "side_cpu": args.inject_side_cpu, "side_mb": args.inject_side_mb,
        },
        "host_sync": args.host_sync,
        "gpu_time_ms": res.gpu.record() if res.gpu is not None else None,
        "startup_s": startup, "gc": res.gc, "timed_cpu_s": res.timed_cpu_s,
        # within-trial switching (the harness fills them in when the loop switched)
        "switching": None, "blocks": None,
    }
    tool = tool_record()
    if tool is not None:
        record["tool"] = tool
    if args.save_step_times:
        record["step_times_ms"] = [d * 1000.0 for d in res.durations_s]
        if res.gpu is not None:
            record["gpu_busy_times_ms"] = list(res.gpu.busy_ms)
            record["gpu_idle_times_ms"] = list(res.gpu.idle_ms)
    return record


def write_record(metrics_dir: str, record: dict[str, Any]) -> None:
    """Write ``rank-<rank>.json`` atomically (temp file + fsync + rename)."""
    write_json_atomic(os.path.join(metrics_dir, rank_record_name(record["rank"])), record)


def gather_records(record: dict[str, Any], rt: Runtime, metrics_dir: str, group: Any) -> None:
    """``--gather-metrics``: every rank's record to rank 0 over the stop flag's gloo ``group``, which writes them all
    (for nodes that do not share ``--metrics-dir``)."""
    import torch.distributed as dist

    gathered: list[Any] | None = [None] * rt.world_size if rt.rank == 0 else None
    dist.gather_object(record, gathered, dst=0, group=group)
    if rt.rank == 0 and gathered is not None:
        for other in gathered:
            if isinstance(other, dict) and other.get("rank") != rt.rank:
                write_record(metrics_dir, other)
