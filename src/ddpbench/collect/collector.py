"""Every ``trial.json`` below one or more paths as one table, one row per trial (docs/results-columns.md).

A file :func:`ddpbench.formats.trial_record.read_trial_record` does not accept is skipped with its reason, never
fatal. Hidden folders are not searched.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from ddpbench.choices import TrialStatus
from ddpbench.formats.layout import AttemptLayout
from ddpbench.formats.rank_loop import GPU_TIME_KEYS, STARTUP_PARTS
from ddpbench.formats.rank_record import INJECT_KEYS, PHASES, STEP_STAT_KEYS, read_rank_record
from ddpbench.formats.trial_record import LOAD_KEYS, TRIAL_FILE, read_trial_record
from ddpbench.io import atomic_path, write_text_atomic

_SCALAR_FIELDS = (
    "schema", "schema_version", "ddpbench_version", "sweep_dir", "job_dir", "job_num", "mode",
    "repeat", "pair_position", "condition_id", "config_hash", "status", "exit_code", "error",
    "started_at", "ended_at", "wall_s", "startup_s", "train_s", "teardown_s", "world_size",
    "nnodes", "nproc_per_node", "steps", "warmup_steps", "samples", "steps_per_s",
    "samples_per_s", "final_loss", "peak_memory_bytes", "workload", "timing", "ray_startup_s", "host_sync",
)
#: ``config.inject`` keys collected as ``inject_<key>`` columns: the rank record's and the device wait
CONFIG_INJECT_KEYS = (*INJECT_KEYS, "device_step_ms")
#: trial record v5's ``startup_split_s`` keys: what ran before the rank's first statement, then the rank's parts
STARTUP_SPLIT_KEYS = ("before_rank", *STARTUP_PARTS)
FLOAT_COLUMNS = (
    "wall_s", "startup_s", "train_s", "teardown_s", "steps_per_s", "samples_per_s", "final_loss", "ray_startup_s",
    *(f"step_time_ms_{s}" for s in STEP_STAT_KEYS), *(f"inject_{k}" for k in CONFIG_INJECT_KEYS),
    "rank_steps_per_s_min", "rank_steps_per_s_max",
    *(f"phase_time_ms_{p}_{s}" for p in PHASES for s in STEP_STAT_KEYS),
    "memory_host_peak_rss_bytes", "memory_cuda_peak_allocated_bytes", "tool_bytes",
    *(f"load_{k}" for k in LOAD_KEYS if k not in ("own_cpus", "cpu_affinity")),
    "switched_step_overhead_ms", "switched_step_overhead_se_ms", "switched_off_step_ms", "switched_step_overhead_pct",
    *(f"gpu_{k}_ms_{s}" for k in GPU_TIME_KEYS for s in STEP_STAT_KEYS), "gpu_late_reads",
    *(f"startup_{k}_s" for k in STARTUP_SPLIT_KEYS),
)


@dataclass(frozen=True)
class CollectResult:
    """``frame``: one row per accepted trial; ``skipped``: ``(path, reason)`` of each file or argument not used."""

    frame: pd.DataFrame
    skipped: list[tuple[str, str]] = field(default_factory=list)
    files_seen: int = 0


def find_trial_files(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[str], list[tuple[str, str]]]:
    """Every ``trial.json`` below ``paths`` (a file path is taken as is), sorted, deduplicated, and
    ``(path, reason)`` for each argument that does not exist."""
    found: set[str] = set()
    problems: list[tuple[str, str]] = []
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isfile(path):
            found.add(os.path.abspath(path))
        elif os.path.isdir(path):
            for folder, dirs, files in os.walk(path):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                if TRIAL_FILE in files:
                    found.add(os.path.abspath(os.path.join(folder, TRIAL_FILE)))
        else:
            problems.append((path, "path does not exist"))
    return sorted(found), problems


def _put_flat(row: dict[str, Any], prefix: str, value: Any) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _put_flat(row, f"{prefix}_{k}", v)
    elif isinstance(value, list):
        row[prefix] = ",".join("" if v is None else str(v) for v in value)
    else:
        row[prefix] = value


def _object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a null or malformed section)."""
    return value if isinstance(value, dict) else {}


def _stop_kind(condition: dict[str, Any], config: dict[str, Any]) -> Any:
    if "stop" in condition:
        return condition["stop"]
    stop = config.get("stop")
    if isinstance(stop, dict):
        stop = next((stop[key] for key in ("kind", "name", "type") if isinstance(stop.get(key), str)), None)
    return stop if isinstance(stop, str) else None


def _put_v2_sections(row: dict[str, Any], trial: dict[str, Any]) -> None:
    """The trial record version 2 sections as flat columns (absent when the section is null)."""
    for section in ("phase_time_ms", "memory", "attempt", "tool", "arm"):
        if isinstance(trial.get(section), dict):
            _put_flat(row, section, trial[section])
    if isinstance(trial.get("load"), dict):
        for key in LOAD_KEYS:
            _put_flat(row, f"load_{key}", trial["load"].get(key))
    metrics = _object(trial.get("metrics"))
    for name, figure in metrics.items():
        value = figure.get("value") if isinstance(figure, dict) else figure
        row[f"metric_{name}"] = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if metrics:
        row["metrics_json"] = json.dumps(metrics, separators=(",", ":"), sort_keys=True, default=str)


def _put_switching(row: dict[str, Any], trial: dict[str, Any], mode: dict[str, Any]) -> None:
    """Within-trial switching (trial record version 4): settings, the trial's estimate, the blocks as JSON."""
    row["switch_stays_on"] = _object(mode.get("switch")).get("stays_on")
    switching = trial.get("switching")
    if not isinstance(switching, dict):
        return
    for key in ("what", "block_steps", "washout_steps", "first_side", "seed"):
        row[f"switch_{key}"] = switching.get(key)
    estimate = _object(switching.get("estimate"))
    for column, key in (("switched_step_overhead_ms", "overhead_ms"), ("switched_step_overhead_se_ms", "se_ms"),
                        ("switched_off_step_ms", "off_step_ms"), ("switched_step_overhead_pct", "overhead_pct"),
                        ("switched_quads", "quads")):
        row[column] = estimate.get(key)
    row["switch_blocks_json"] = json.dumps(switching.get("blocks"), separators=(",", ":"))


def _put_loop(row: dict[str, Any], trial: dict[str, Any]) -> None:
    """Trial record version 5: the GPU split per step, the start-up split, the collector (absent when null)."""
    gpu = trial.get("gpu_time_ms")
    if isinstance(gpu, dict):
        for key in GPU_TIME_KEYS:
            stats = _object(gpu.get(key))
            row.update({f"gpu_{key}_ms_{stat}": stats.get(stat) for stat in STEP_STAT_KEYS})
        row["gpu_late_reads"] = gpu.get("late_reads")
    split = trial.get("startup_split_s")
    if isinstance(split, dict):
        row.update({f"startup_{key}_s": split.get(key) for key in STARTUP_SPLIT_KEYS})
    collector = trial.get("gc")
    if isinstance(collector, dict):
        row["gc_mode"] = collector.get("mode")
        for generation, count in enumerate(collector.get("collections") or []):
            row[f"gc_collections_gen{generation}"] = count


def flatten_trial(trial: dict[str, Any], source_path: str = "") -> dict[str, Any]:
    """One trial dict (already validated) as one flat row; columns in docs/results-columns.md."""
    row: dict[str, Any] = {"source_path": source_path, **{name: trial.get(name) for name in _SCALAR_FIELDS}}
    step_times = _object(trial.get("step_time_ms"))
    row.update({f"step_time_ms_{stat}": step_times.get(stat) for stat in STEP_STAT_KEYS})
    condition = trial["condition"]
    row.update({f"cond_{k}": v for k, v in condition.items()})
    for section, prefix in (("environment", "env"), ("traceml", "traceml")):
        if isinstance(trial.get(section), dict):
            _put_flat(row, prefix, trial[section])
    if isinstance(trial.get("logs"), dict):
        row.update({f"logs_{k}": trial["logs"].get(k) for k in ("stdout", "stderr", "tail")})
    attempt = _object(trial.get("attempt"))
    row["attempt_number"], row["attempt_dir"] = attempt.get("number"), attempt.get("dir")
    config = trial.get("config")
    inject = _object(config).get("inject")
    if isinstance(inject, dict):
        row.update({f"inject_{k}": inject.get(k) for k in CONFIG_INJECT_KEYS})
    row["stop_kind"] = _stop_kind(condition, _object(config))
    mode = _object(_object(config).get("mode"))
    row["role"] = mode.get("role")
    _put_switching(row, trial, mode)
    ranks: list[Any] = trial["ranks"] if isinstance(trial.get("ranks"), list) else []
    nodes = trial.get("nodes")
    row["n_ranks"], row["n_nodes"] = len(ranks), len(nodes) if isinstance(nodes, list) else 0
    rates = [rate for r in ranks if isinstance(r, dict) for rate in [r.get("steps_per_s")]
             if isinstance(rate, (int, float))]
    row["rank_steps_per_s_min"] = min(rates) if rates else None
    row["rank_steps_per_s_max"] = max(rates) if rates else None
    _put_v2_sections(row, trial)
    _put_loop(row, trial)
    row["overrides_json"] = json.dumps(trial.get("overrides"), separators=(",", ":"))
    row["config_json"] = json.dumps(config, separators=(",", ":"), sort_keys=True, default=str)
    return row


def collect_trials(paths: Iterable[str | os.PathLike[str]]) -> CollectResult:
    """Every usable ``trial.json`` below ``paths`` in one DataFrame, ordered by (sweep_dir, job_num, source_path);
    unusable files and nonexistent arguments in ``skipped`` with their reasons."""
    files, skipped = find_trial_files(paths)
    rows = []
    for path in files:
        trial, reason = read_trial_record(path)
        if trial is None:
            skipped.append((path, reason or "unusable"))
        else:
            rows.append(flatten_trial(trial, path))
    if not rows:
        return CollectResult(pd.DataFrame(columns=["source_path", *_SCALAR_FIELDS]), skipped, len(files))
    frame = pd.DataFrame.from_records(rows)
    for col in [*FLOAT_COLUMNS, *(c for c in frame.columns if c.startswith("metric_"))]:
        if col in frame.columns:
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    frame = frame.sort_values(["sweep_dir", "job_num", "source_path"], kind="stable", na_position="last")
    return CollectResult(frame.reset_index(drop=True), skipped, len(files))


def _as_text(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value if value is None or value != value else str(value)


def _one_kind_a_column(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as Parquet can hold it: a column whose values are of more than one kind (a list in one trial's
    record, text in another's) holds them as text, lists and mappings as JSON."""
    mixed = [c for c in frame.columns[frame.dtypes == object] if len({type(v) for v in frame[c].dropna()}) > 1]
    if not mixed:
        return frame
    return frame.assign(**{c: frame[c].map(_as_text) for c in mixed})


def write_results(frame: pd.DataFrame, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``results.csv`` (and ``results.parquet`` when pyarrow imports) atomically into ``out_dir``."""
    out = Path(out_dir)
    written = [write_text_atomic(out / "results.csv", frame.to_csv(index=False))]
    try:
        import pyarrow  # noqa: F401  (optional: Parquet only when it is installed)
    except ImportError:
        return written
    target = out / "results.parquet"
    with atomic_path(target) as tmp:
        _one_kind_a_column(frame).to_parquet(tmp, index=False)
    written.append(target)
    return written


def load_step_times(frame: pd.DataFrame, rank: int = 0) -> pd.DataFrame:
    """Every timed step's duration (ms) of each ok trial, from ``rank``'s record of that trial's own attempt
    (``attempt_dir``; ``job_dir`` for a version 1 record), as columns ``mode``, ``repeat``, ``step_ms``; trials
    without a rank record or its ``step_times_ms`` (``trial.save_step_times=false``) are left out."""
    parts = []
    ok = frame[frame["status"] == TrialStatus.ok] if "status" in frame.columns else frame
    attempts = ok["attempt_dir"] if "attempt_dir" in ok.columns else [None] * len(ok)
    folders = [Path(a) if isinstance(a, str) and a else Path(str(j)) for a, j in zip(attempts, ok.get("job_dir", []))]
    for mode, repeat, folder in zip(ok.get("mode", []), ok.get("repeat", []), folders):
        record, _ = read_rank_record(AttemptLayout(folder).rank_record(rank))
        steps = record.get("step_times_ms") if record is not None else None
        if steps:
            parts.append(pd.DataFrame({"mode": mode, "repeat": repeat, "step_ms": steps}))
    if not parts:
        return pd.DataFrame(columns=["mode", "repeat", "step_ms"])
    return pd.concat(parts, ignore_index=True)
