"""Build valid ``trial.json`` payloads (schema ``ddpbench.trial`` v1, docs/formats.md) for tests.

``make_trial(**overrides)`` returns one trial dict with self-consistent figures; any top-level
field can be overridden, and the step-time summary is derived from ``step_ms`` unless given.
``write_trial`` writes it where a Hydra multirun would (``<sweep>/<job_num>/trial.json``);
``make_sweep`` writes a whole paired sweep with alternating order.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable, Iterable

SCHEMA = "ddpbench.trial"
SCHEMA_VERSION = 1

DEFAULT_CONDITION = {"cluster": "local", "model": "tiny", "stop": "steps"}


def condition_id(condition: dict[str, Any]) -> str:
    """``condition`` as ``k=v`` joined by ``,`` in key order (docs/formats.md)."""
    return ",".join(f"{k}={v}" for k, v in condition.items())


def step_summary(mean_ms: float, stdev_ms: float = 0.0) -> dict[str, float]:
    """A step-time summary centred on ``mean_ms``."""
    return {
        "mean": mean_ms,
        "median": mean_ms,
        "p10": mean_ms - stdev_ms,
        "p90": mean_ms + stdev_ms,
        "p99": mean_ms + 2 * stdev_ms,
        "min": mean_ms - 2 * stdev_ms,
        "max": mean_ms + 3 * stdev_ms,
        "stdev": stdev_ms,
    }


def make_trial(
    *,
    sweep_dir: str = "/tmp/sweep",
    mode: str = "native",
    repeat: int = 1,
    pair_position: int = 0,
    job_num: int = 0,
    condition: dict[str, Any] | None = None,
    status: str = "ok",
    startup_s: float = 5.0,
    train_s: float = 100.0,
    teardown_s: float = 1.0,
    steps: int = 1000,
    step_ms: float | None = None,
    step_stdev_ms: float = 1.0,
    hostnames: Iterable[str] = ("node-a",),
    inject: dict[str, float] | None = None,
    world_size: int = 2,
    nnodes: int = 1,
    global_batch: int = 64,
    **overrides: Any,
) -> dict[str, Any]:
    """One valid trial dict. ``steps_per_s = steps / train_s``; ``step_ms`` defaults to
    ``1000 * train_s / steps``; ``wall_s = startup_s + train_s + teardown_s``. Fields in
    ``overrides`` replace the built ones (``None`` values included)."""
    cond = dict(DEFAULT_CONDITION if condition is None else condition)
    inj = {"step_ms": 0.0, "startup_s": 0.0, "teardown_s": 0.0, **(inject or {})}
    hosts = list(hostnames)
    ok = status == "ok"
    steps_per_s = steps / train_s
    mean_ms = 1000.0 * train_s / steps if step_ms is None else step_ms
    job_dir = f"{sweep_dir}/{job_num}"
    ovr = [f"mode={mode}", f"repeat={repeat}"] + [f"{k}={v}" for k, v in cond.items()]
    config = {
        "mode": {"name": mode, "launcher": "traceml" if mode == "traceml" else "torchrun"},
        "repeat": repeat,
        "cluster": {"name": cond.get("cluster", "local"), "nnodes": nnodes},
        "model": {"name": cond.get("model", "tiny"), "hidden": 64},
        "stop": {"kind": cond.get("stop", "steps"), "steps": steps},
        "inject": inj,
    }
    trial: dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "ddpbench_version": "0.1.0",
        "sweep_dir": sweep_dir,
        "job_dir": job_dir,
        "job_num": job_num,
        "mode": mode,
        "repeat": repeat,
        "pair_position": pair_position,
        "condition": cond,
        "condition_id": condition_id(cond),
        "overrides": ovr,
        "config": config,
        "config_hash": f"hash-{mode}-{repeat}-{job_num}",
        "status": status,
        "exit_code": 0 if ok else 1,
        "error": None if ok else "rank 1 exited with code 1",
        "started_at": "2026-01-01T00:00:00Z",
        "ended_at": "2026-01-01T00:02:00Z",
        "wall_s": startup_s + train_s + teardown_s if ok else None,
        "startup_s": startup_s if ok else None,
        "train_s": train_s if ok else None,
        "teardown_s": teardown_s if ok else None,
        "world_size": world_size,
        "nnodes": nnodes,
        "nproc_per_node": world_size // nnodes,
        "steps": steps if ok else None,
        "warmup_steps": 10,
        "samples": steps * global_batch if ok else None,
        "steps_per_s": steps_per_s if ok else None,
        "samples_per_s": steps_per_s * global_batch if ok else None,
        "step_time_ms": step_summary(mean_ms, step_stdev_ms) if ok else None,
        "final_loss": 2.3 if ok else None,
        "peak_memory_bytes": 123456789 if ok else None,
        "ranks": [
            {
                "rank": r,
                "node_rank": r * nnodes // world_size,
                "hostname": hosts[min(len(hosts) - 1, r * nnodes // world_size)],
                "steps": steps,
                "steps_per_s": steps_per_s,
                "train_s": train_s,
                "step_time_ms": step_summary(mean_ms, step_stdev_ms),
            }
            for r in range(world_size)
        ]
        if ok
        else [],
        "nodes": [
            {
                "node_rank": n,
                "hostname": hosts[min(len(hosts) - 1, n)],
                "wall_s": startup_s + train_s + teardown_s,
                "exit_code": 0 if ok else 1,
                "spawn_epoch": 1767225600.0,
                "exit_epoch": 1767225600.0 + startup_s + train_s + teardown_s,
            }
            for n in range(nnodes)
        ],
        "traceml": {
            "summary_path": f"{job_dir}/traceml/final_summary.json",
            "steps_analyzed": steps,
            "step_time_ms": {"step_time_ms": mean_ms, "forward_ms": mean_ms / 3},
            "step_time_median_ms": {"step_time_ms": mean_ms},
        }
        if mode == "traceml" and ok
        else None,
        "environment": {
            "hostnames": hosts,
            "python": "3.11.9",
            "platform": "Linux-6.1-x86_64",
            "torch": "2.5.1",
            "cuda": None,
            "nccl": None,
            "gpu_names": [],
            "traceml_ai": "0.5.0" if mode == "traceml" else None,
            "ddpbench": "0.1.0",
            "git_commit": "abc1234",
            "cpu_model": "Test CPU @ 2.0GHz",
            "cpu_count": 2,
        },
        "logs": {
            "stdout": f"{job_dir}/stdout.log",
            "stderr": f"{job_dir}/stderr.log",
            "tail": None if ok else "RuntimeError: boom",
        },
    }
    trial.update(copy.deepcopy(overrides))
    return trial


def write_trial(sweep_dir: Path, trial: dict[str, Any], subdir: str | None = None) -> Path:
    """Write ``trial`` to ``<sweep_dir>/<subdir or job_num>/trial.json``; returns the path."""
    path = Path(sweep_dir) / (subdir if subdir is not None else str(trial["job_num"])) / "trial.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trial, indent=2), encoding="utf-8")
    return path


def make_sweep(
    sweep_dir: Path,
    modes: tuple[str, ...] = ("native", "traceml"),
    repeats: int = 5,
    condition: dict[str, Any] | None = None,
    per_trial: Callable[[str, int], dict[str, Any]] | None = None,
    job_offset: int = 0,
) -> list[Path]:
    """Write a paired sweep: for each repeat, every mode once, order alternating by repeat.

    ``per_trial(mode, repeat)`` returns keyword overrides for :func:`make_trial` (e.g. figures).
    """
    paths = []
    job = job_offset
    for repeat in range(1, repeats + 1):
        order = list(modes) if repeat % 2 else list(reversed(modes))
        for position, mode in enumerate(order):
            kwargs: dict[str, Any] = {
                "sweep_dir": str(sweep_dir),
                "mode": mode,
                "repeat": repeat,
                "pair_position": position,
                "job_num": job,
                "condition": condition,
            }
            if per_trial is not None:
                kwargs.update(per_trial(mode, repeat))
            paths.append(write_trial(sweep_dir, make_trial(**kwargs)))
            job += 1
    return paths


def make_rank_record(rank: int = 0, step_times_ms: list[float] | None = None, **overrides: Any) -> dict[str, Any]:
    """A valid rank record (schema ``ddpbench.rank`` v1) of one rank; ``step_times_ms`` is included when given."""
    steps = list(step_times_ms) if step_times_ms is not None else [10.0] * 5
    train_s = sum(steps) / 1000.0
    record: dict[str, Any] = {
        "schema": "ddpbench.rank", "schema_version": 1, "rank": rank, "local_rank": rank, "world_size": max(2, rank + 1),
        "node_rank": 0, "hostname": "node-a", "pid": 100 + rank, "device": "cpu", "backend": "gloo",
        "precision": "fp32", "torch_version": "2.13.0", "cuda_version": None, "nccl_version": None, "gpu_name": None,
        "args": {"batch_size": 4}, "timestamps": {"process_start": 1.0, "pg_ready": 2.0, "first_step_start": 3.0,
                                                 "last_step_end": 3.0 + train_s, "exit": 4.0 + train_s},
        "warmup_steps": 1, "timed_steps": len(steps), "samples": 4 * len(steps), "train_s": train_s,
        "steps_per_s": len(steps) / train_s, "samples_per_s": 4 * len(steps) / train_s,
        "step_time_ms": step_summary(sum(steps) / len(steps)), "final_loss": 1.0, "peak_memory_bytes": 1,
        "peak_memory_kind": "max_rss", "stop_reason": "steps", "traceml": {"active": False, "mode": None},
        "inject": {"step_ms": 0.0, "startup_s": 0.0, "teardown_s": 0.0},
    }
    if step_times_ms is not None:
        record["step_times_ms"] = steps
    record.update(overrides)
    return record


def write_versions_sweep(root: Path, name: str, step_ms: dict[str, list[float]],
                         versions: dict[str, list[str]] | None = None, date: str = "2026-12-01",
                         cpu: str = "cpu-x") -> Path:
    """A ``versions=`` sweep whose arms ran the given per-step times (ms), one value per repeat, one block per
    repeat (default versions: traceml 0.4.2 and 0.5.0)."""
    sweep = root / name
    versions = {"traceml": ["0.4.2", "0.5.0"]} if versions is None else versions
    job = 0
    for repeat in range(1, len(step_ms["native"]) + 1):
        for position, (mode, times) in enumerate(step_ms.items()):
            trial = make_trial(sweep_dir=str(sweep), mode=mode, repeat=repeat, pair_position=position, job_num=job,
                               step_ms=times[repeat - 1], started_at=f"{date}T10:00:00+00:00")
            trial["config"]["versions"] = versions
            trial["environment"]["cpu_model"] = cpu
            trial["arm"] = {"version": mode.split("==")[1]} if "==" in mode else None
            write_trial(sweep, trial, subdir=f"job{job}")
            job += 1
    return sweep
