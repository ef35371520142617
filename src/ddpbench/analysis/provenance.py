"""Provenance of a report, from the collected table: hardware, topology, versions, the command, config differences."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd

from ddpbench.analysis.pairing import str_or_none
from ddpbench.choices import TrialStatus
from ddpbench.formats.condition import SWEEPER_KEYS, VERSION_KEY, VERSIONS_KEY

#: (label, column) of the versions the report's setup names, in that order
VERSION_COLUMNS = (
    ("Python", "env_python"), ("torch", "env_torch"), ("CUDA", "env_cuda"), ("NCCL", "env_nccl"),
    ("traceml-ai", "env_traceml_ai"), ("ddpbench", "env_ddpbench"), ("git", "env_git_commit"),
    ("platform", "env_platform"),
)


@dataclass(frozen=True)
class Provenance:
    """What the trials of a report ran on; each list holds the distinct values seen, in first-seen order."""

    cpu_models: list[str]
    cpu_counts: list[str]
    gpu_names: list[str]
    hostnames: list[str]
    # "<world> ranks = <nnodes> node(s) × <nproc>" per distinct topology
    topologies: list[str]
    # (label, [values]) for each version column that has a value
    versions: list[tuple[str, list[str]]]
    # a `python3 -m ddpbench -m ...` command equivalent to the trials' overrides
    command: str
    # condition_id -> (modes, [(dotted key, [value per mode])]) of its config differences between modes
    config_differences: dict[str, tuple[list[str], list[tuple[str, list[str]]]]]
    # workload=ray_train: (mode, mean ray_startup_s of its ok trials in s, trials): Ray's own part of start-up
    ray_startup: list[tuple[str, float, int]] = field(default_factory=list)
    # the job's host-sync patterns: (pattern, [condition_id, ...]) in first-seen order; empty when none recorded
    host_syncs: list[tuple[str, list[str]]] = field(default_factory=list)


def _unique(values: Iterable[Any]) -> list[str]:
    return list(dict.fromkeys(text for text in map(str_or_none, values) if text))


def _col(frame: pd.DataFrame, name: str) -> list[Any]:
    return frame[name].tolist() if name in frame.columns else []


def command_line(frame: pd.DataFrame) -> str:
    """A ``ddpbench --multirun`` command equivalent to the trials' Hydra overrides (values in first-seen order)."""
    keys: dict[str, dict[str, None]] = {}
    for text in _col(frame, "overrides_json"):
        try:
            overrides = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            continue
        for item in overrides or []:
            key, sep, value = str(item).partition("=")
            if sep and key not in SWEEPER_KEYS and key != VERSION_KEY:  # the sweeper makes version= from versions=
                keys.setdefault(key, {}).setdefault(value, None)
    parts = [f"'{k}={','.join(v)}'" if k == VERSIONS_KEY else f"{k}={','.join(v)}" for k, v in keys.items()]
    return "python3 -m ddpbench -m " + " ".join(parts) if parts else "(no overrides recorded)"


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = json.dumps(value, default=str)


def config_differences(frame: pd.DataFrame, baseline: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """``(modes, [(dotted key, [value per mode])])`` of the resolved-config keys whose values differ between modes
    (one ok trial per mode, ``repeat`` ignored)."""
    per_mode: dict[str, dict[str, str]] = {}
    if "config_json" not in frame.columns:
        return [], []
    ok = frame[frame["status"] == TrialStatus.ok] if "status" in frame.columns else frame
    for mode, text in zip(ok["mode"], ok["config_json"]):
        if mode in per_mode or not isinstance(text, str):
            continue
        try:
            cfg = json.loads(text)
        except ValueError:
            continue
        flat: dict[str, str] = {}
        _flatten("", cfg, flat)
        if flat.get("workload.trains", "null") == "null":  # not Ray Train: the modes' trainers were not used
            flat = {k: v for k, v in flat.items() if not k.startswith("mode.ray_trainer")}
        per_mode[str(mode)] = flat
    modes = sorted(per_mode, key=lambda m: (m != baseline, m))
    keys = sorted({k for flat in per_mode.values() for k in flat})
    rows = []
    for key in keys:
        if key in ("repeat", *SWEEPER_KEYS):
            continue
        values = [per_mode[m].get(key, "—") for m in modes]
        if len(set(values)) > 1:
            rows.append((key, values))
    return modes, rows


def ray_startup(frame: pd.DataFrame, baseline: str) -> list[tuple[str, float, int]]:
    """Per mode (baseline first): the mean ``ray_startup_s`` of its ok trials (s) and their number; [] without any."""
    if "ray_startup_s" not in frame.columns or "mode" not in frame.columns:
        return []
    ok = frame[frame["status"] == TrialStatus.ok] if "status" in frame.columns else frame
    values = pd.to_numeric(ok["ray_startup_s"], errors="coerce")
    out = []
    for mode in sorted(set(ok["mode"][values.notna()]), key=lambda m: (m != baseline, str(m))):
        mine = values[(ok["mode"] == mode) & values.notna()]
        out.append((str(mode), float(mine.mean()), int(mine.size)))
    return out


def host_syncs(frame: pd.DataFrame) -> list[tuple[str, list[str]]]:
    """Each host-sync pattern the trials ran (trial record v5 ``host_sync``) with the conditions that ran it."""
    found: dict[str, dict[str, None]] = {}
    for value, cond in zip(_col(frame, "host_sync"), _col(frame, "condition_id")):
        if isinstance(value, str) and value:
            found.setdefault(value, {}).setdefault(str(cond), None)
    return [(value, list(conds)) for value, conds in found.items()]


def provenance(frame: pd.DataFrame, baseline: str) -> Provenance:
    """The :class:`Provenance` of the trials in ``frame`` (config differences per condition)."""
    hosts = sorted({h for v in _unique(_col(frame, "env_hostnames")) for h in v.split(",") if h})
    topologies = _unique(
        f"{w} ranks = {n} node(s) × {p}"
        for w, n, p in zip(_col(frame, "world_size"), _col(frame, "nnodes"), _col(frame, "nproc_per_node"))
    )
    versions = [(label, _unique(_col(frame, col))) for label, col in VERSION_COLUMNS]
    groups = frame.groupby("condition_id", sort=True) if "condition_id" in frame.columns else []
    return Provenance(
        cpu_models=_unique(_col(frame, "env_cpu_model")),
        cpu_counts=_unique(_col(frame, "env_cpu_count")),
        gpu_names=_unique(_col(frame, "env_gpu_names")),
        hostnames=hosts,
        topologies=topologies,
        versions=[(label, values) for label, values in versions if values],
        command=command_line(frame),
        config_differences={str(cond): config_differences(sub, baseline) for cond, sub in groups},
        ray_startup=ray_startup(frame, baseline),
        host_syncs=host_syncs(frame),
    )
