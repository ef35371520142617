"""Read every ``trial.json`` below one or more paths into one tidy table, one row per trial.

Files are found by a recursive :func:`os.scandir` walk that skips hidden directories
(``.hydra``, ``.git``, ...). A file is accepted when it parses as a JSON object whose ``schema`` is
``ddpbench.trial`` of any version this ddpbench knows, and which has the fields pairing needs
(:func:`ddpbench.formats.trial_record.read_trial_record`, which upgrades earlier versions in
memory). Anything else is skipped and listed with its reason, never fatal.

Columns (see also ``docs/results-columns.md``):

- ``source_path``: the file the row came from (str).
- Top-level scalars keep their names: ``schema, schema_version, ddpbench_version, sweep_dir,
  job_dir, job_num, mode, repeat, pair_position, condition_id, config_hash, status, exit_code,
  error, started_at, ended_at, wall_s, startup_s, train_s, teardown_s, world_size, nnodes,
  nproc_per_node, steps, warmup_steps, samples, steps_per_s, samples_per_s, final_loss,
  peak_memory_bytes, workload, timing, ray_startup_s`` (``workload`` and ``timing`` null in version 1
  records; ``ray_startup_s`` null except for ``workload=ray_train``).
- ``step_time_ms_<stat>`` for ``stat`` in ``mean, median, p10, p90, p99, min, max, stdev`` (ms).
- ``cond_<key>``: every key of ``condition`` (values as written, usually str).
- ``env_<key>``: every key of ``environment``; lists (``hostnames``, ``gpu_names``) are joined
  with ``,``.
- ``traceml_<key>``: ``traceml`` fields; its nested objects flattened with ``_``
  (``traceml_step_time_ms_forward_ms``, ``traceml_step_time_median_ms_step_time_ms``, ...).
- ``logs_stdout, logs_stderr, logs_tail``.
- ``attempt_number, attempt_dir``: the record's ``attempt`` (empty for version 1 records, whose
  rank records and logs lie in ``job_dir`` itself).
- ``inject_step_ms, inject_startup_s, inject_teardown_s, inject_device_step_ms``: ``config.inject`` (ms, s, s, ms);
  missing when the config has no ``inject`` block.
- ``stop_kind``: ``condition.stop`` if present, else ``config.stop`` (a string, or its
  ``kind``/``name``/``type``); e.g. ``steps`` or ``duration``.
- ``role``: ``config.mode.role``, what the mode is to the analysis (``baseline``, ``tool``, ``aa``,
  ``calibration``; the reader gives records older than the field the role their mode's name implied).
- Within-trial switching (version 4 ``switching``, absent when null): ``switch_what, switch_block_steps,
  switch_washout_steps, switch_first_side, switch_seed``, the trial's estimate ``switched_step_overhead_ms``,
  ``switched_step_overhead_se_ms``, ``switched_off_step_ms`` (ms), ``switched_step_overhead_pct``, ``switched_quads``,
  and ``switch_blocks_json`` (the blocks); ``switch_stays_on``: ``config.mode.switch.stays_on``.
- ``n_ranks, n_nodes``: lengths of ``ranks`` and ``nodes``; ``rank_steps_per_s_min`` and
  ``rank_steps_per_s_max`` over ranks.
- Version 2 sections, absent when null: ``phase_time_ms_<phase>_<stat>`` (ms),
  ``memory_host_peak_rss_bytes``, ``memory_cuda_peak_allocated_bytes`` (bytes),
  ``attempt_number, attempt_dir``, ``load_<key>`` (every key of ``load``; ``own_cpus`` as written,
  a list joined with ``,``), ``tool_name, tool_artifacts, tool_bytes, tool_usable, tool_problem, tool_format``,
  ``arm_<key>`` (version 4's ``arm``: ``arm_mode, arm_spec, arm_version``...; absent without ``versions=``),
  ``metric_<name>`` (each figure's value) and ``metrics_json`` (the whole ``metrics`` section, with
  units and sources).
- Version 5: ``host_sync`` (the job's host-sync pattern; a scalar above), ``gpu_busy_ms_<stat>`` and
  ``gpu_idle_ms_<stat>`` (``gpu_time_ms``: per step, ms; absent on CPU), ``gpu_late_reads``, ``startup_<part>_s``
  (``startup_split_s``: ``before_rank`` and each start-up part, s; absent when unknown), ``gc_mode`` and
  ``gc_collections_gen<g>`` (rank 0's collector in the timed loop).
- ``overrides_json``, ``config_json``: the ``overrides`` list and the resolved ``config`` as
  compact JSON text (the report derives the command and mode differences from them).

Figures that the trial could not measure (``status`` not ``ok``) are empty (NaN).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import pandas as pd

from ddpbench.formats.layout import AttemptLayout
from ddpbench.formats.rank_loop import GPU_TIME_KEYS, STARTUP_PARTS
from ddpbench.formats.rank_record import INJECT_KEYS, PHASES, STEP_STAT_KEYS, read_rank_record
from ddpbench.formats.trial_record import LOAD_KEYS, TRIAL_FILE, read_trial_record
from ddpbench.io import atomic_path, write_text_atomic

__all__ = ["CollectResult", "collect_trials", "find_trial_files", "flatten_trial", "load_step_times", "write_results"]

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
    """The collected table and the files left out.

    ``frame`` has one row per accepted trial (columns in the module docstring);
    ``skipped`` lists ``(path, reason)`` for every file or argument that was not used.
    """

    frame: pd.DataFrame
    skipped: list[tuple[str, str]] = field(default_factory=list)
    files_seen: int = 0


def _walk(root: str) -> Iterator[str]:
    stack = [root]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.name == TRIAL_FILE:
                            yield entry.path
                    except OSError:
                        continue
        except OSError:
            continue


def find_trial_files(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[str], list[tuple[str, str]]]:
    """Every ``trial.json`` below ``paths`` (a file path is taken as is), sorted, deduplicated.

    Returns ``(files, problems)``, ``problems`` being ``(path, reason)`` for arguments that do
    not exist.
    """
    found: dict[str, None] = {}
    problems: list[tuple[str, str]] = []
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isfile(path):
            found.setdefault(os.path.abspath(path), None)
        elif os.path.isdir(path):
            for f in _walk(path):
                found.setdefault(os.path.abspath(f), None)
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


def _stop_kind(condition: dict[str, Any], config: Any) -> Any:
    if "stop" in condition:
        return condition["stop"]
    stop = config.get("stop") if isinstance(config, dict) else None
    if isinstance(stop, str):
        return stop
    if isinstance(stop, dict):
        for key in ("kind", "name", "type"):
            if isinstance(stop.get(key), str):
                return stop[key]
    return None


def _put_v2_sections(row: dict[str, Any], trial: dict[str, Any]) -> None:
    """The trial record version 2 sections as flat columns (absent when the section is null)."""
    for section in ("phase_time_ms", "memory", "attempt", "tool", "arm"):
        value = trial.get(section)
        if isinstance(value, dict):
            _put_flat(row, section, value)
    load = trial.get("load")
    if isinstance(load, dict):
        for key in LOAD_KEYS:
            _put_flat(row, f"load_{key}", load.get(key))
    metrics = trial.get("metrics")
    if isinstance(metrics, dict) and metrics:
        for name, figure in metrics.items():
            value = figure.get("value") if isinstance(figure, dict) else figure
            row[f"metric_{name}"] = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        row["metrics_json"] = json.dumps(metrics, separators=(",", ":"), sort_keys=True, default=str)


def _put_switching(row: dict[str, Any], trial: dict[str, Any], mode: Any) -> None:
    """Within-trial switching (trial record version 4): settings, the trial's estimate, the blocks as JSON."""
    switching = trial.get("switching")
    switch = mode.get("switch") if isinstance(mode, dict) else None
    row["switch_stays_on"] = switch.get("stays_on") if isinstance(switch, dict) else None
    if not isinstance(switching, dict):
        return
    for key in ("what", "block_steps", "washout_steps", "first_side", "seed"):
        row[f"switch_{key}"] = switching.get(key)
    found = switching.get("estimate")
    estimate: dict[str, Any] = found if isinstance(found, dict) else {}
    row["switched_step_overhead_ms"] = estimate.get("overhead_ms")
    row["switched_step_overhead_se_ms"] = estimate.get("se_ms")
    row["switched_off_step_ms"] = estimate.get("off_step_ms")
    row["switched_step_overhead_pct"] = estimate.get("overhead_pct")
    row["switched_quads"] = estimate.get("quads")
    row["switch_blocks_json"] = json.dumps(switching.get("blocks"), separators=(",", ":"))


def _put_loop(row: dict[str, Any], trial: dict[str, Any]) -> None:
    """Trial record version 5: the GPU split per step, the start-up split, the collector (absent when null)."""
    gpu = trial.get("gpu_time_ms")
    if isinstance(gpu, dict):
        for key in GPU_TIME_KEYS:
            found = gpu.get(key)
            stats: dict[str, Any] = found if isinstance(found, dict) else {}
            for stat in STEP_STAT_KEYS:
                row[f"gpu_{key}_ms_{stat}"] = stats.get(stat)
        row["gpu_late_reads"] = gpu.get("late_reads")
    split = trial.get("startup_split_s")
    if isinstance(split, dict):
        for key in STARTUP_SPLIT_KEYS:
            row[f"startup_{key}_s"] = split.get(key)
    collector = trial.get("gc")
    if isinstance(collector, dict):
        row["gc_mode"] = collector.get("mode")
        for generation, count in enumerate(collector.get("collections") or []):
            row[f"gc_collections_gen{generation}"] = count


def flatten_trial(trial: dict[str, Any], source_path: str = "") -> dict[str, Any]:
    """One trial dict (already validated) as one flat row; column names in the module docstring."""
    row: dict[str, Any] = {"source_path": source_path}
    for name in _SCALAR_FIELDS:
        row[name] = trial.get(name)
    stt = trial.get("step_time_ms") or {}
    for stat in STEP_STAT_KEYS:
        row[f"step_time_ms_{stat}"] = stt.get(stat) if isinstance(stt, dict) else None
    condition = trial["condition"]
    for k, v in condition.items():
        row[f"cond_{k}"] = v
    env = trial.get("environment")
    if isinstance(env, dict):
        for k, v in env.items():
            _put_flat(row, f"env_{k}", v)
    tml = trial.get("traceml")
    if isinstance(tml, dict):
        for k, v in tml.items():
            _put_flat(row, f"traceml_{k}", v)
    logs = trial.get("logs")
    if isinstance(logs, dict):
        for k in ("stdout", "stderr", "tail"):
            row[f"logs_{k}"] = logs.get(k)
    attempt = trial.get("attempt")
    if not isinstance(attempt, dict):
        attempt = {}
    row["attempt_number"] = attempt.get("number")
    row["attempt_dir"] = attempt.get("dir")
    config = trial.get("config")
    inject = config.get("inject") if isinstance(config, dict) else None
    if isinstance(inject, dict):
        for k in CONFIG_INJECT_KEYS:
            row[f"inject_{k}"] = inject.get(k)
    row["stop_kind"] = _stop_kind(condition, config)
    mode = config.get("mode") if isinstance(config, dict) else None
    row["role"] = mode.get("role") if isinstance(mode, dict) else None
    _put_switching(row, trial, mode)
    ranks = trial.get("ranks")
    if not isinstance(ranks, list):
        ranks = []
    nodes = trial.get("nodes")
    if not isinstance(nodes, list):
        nodes = []
    row["n_ranks"] = len(ranks)
    row["n_nodes"] = len(nodes)
    raw_rates = [r.get("steps_per_s") for r in ranks if isinstance(r, dict)]
    rates = [r for r in raw_rates if isinstance(r, (int, float))]
    row["rank_steps_per_s_min"] = min(rates) if rates else None
    row["rank_steps_per_s_max"] = max(rates) if rates else None
    _put_v2_sections(row, trial)
    _put_loop(row, trial)
    row["overrides_json"] = json.dumps(trial.get("overrides"), separators=(",", ":"))
    row["config_json"] = json.dumps(config, separators=(",", ":"), sort_keys=True, default=str)
    return row


def collect_trials(paths: Iterable[str | os.PathLike[str]]) -> CollectResult:
    """Collect every usable ``trial.json`` below ``paths`` into one DataFrame.

    Rows are ordered by (sweep_dir, job_num, source_path). Unusable files and nonexistent
    arguments are listed in ``skipped`` with their reasons.
    """
    files, skipped = find_trial_files(paths)
    rows = []
    for path in files:
        trial, reason = read_trial_record(path)
        if trial is None:
            skipped.append((path, reason or "unusable"))
            continue
        rows.append(flatten_trial(trial, path))
    frame = pd.DataFrame.from_records(rows) if rows else pd.DataFrame(columns=["source_path", *_SCALAR_FIELDS])
    if rows:
        for col in [*FLOAT_COLUMNS, *(c for c in frame.columns if c.startswith("metric_"))]:
            if col in frame.columns:
                frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
        frame = frame.sort_values(["sweep_dir", "job_num", "source_path"], kind="stable", na_position="last")
        frame = frame.reset_index(drop=True)
    return CollectResult(frame=frame, skipped=skipped, files_seen=len(files))


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
        frame.to_parquet(tmp, index=False)
    written.append(target)
    return written


def load_step_times(frame: pd.DataFrame, rank: int = 0) -> pd.DataFrame:
    """Every timed step's duration (ms) of each ok trial, from ``rank``'s record of that trial's own attempt.

    The record is read from the trial's ``attempt_dir`` (``job_dir`` for a version 1 record), never
    from another attempt of the same trial.

    Long format: columns ``mode``, ``repeat``, ``step_ms``. Trials whose rank record is missing or
    has no ``step_times_ms`` (``trial.save_step_times=false``) are left out; the result may be empty.
    """
    parts = []
    ok = frame[frame["status"] == "ok"] if "status" in frame.columns else frame
    for mode, repeat, folder in zip(ok.get("mode", []), ok.get("repeat", []), _attempt_dirs(ok)):
        record, _ = read_rank_record(AttemptLayout(folder).rank_record(rank))
        steps = record.get("step_times_ms") if record is not None else None
        if steps:
            parts.append(pd.DataFrame({"mode": mode, "repeat": repeat, "step_ms": steps}))
    if not parts:
        return pd.DataFrame(columns=["mode", "repeat", "step_ms"])
    return pd.concat(parts, ignore_index=True)


def _attempt_dirs(frame: pd.DataFrame) -> list[Path]:
    """Each row's attempt folder: ``attempt_dir`` when the record names one, else its ``job_dir`` (version 1)."""
    attempt_dirs = frame["attempt_dir"] if "attempt_dir" in frame.columns else [None] * len(frame)
    return [Path(a) if isinstance(a, str) and a else Path(str(j)) for a, j in zip(attempt_dirs, frame.get("job_dir", []))]
