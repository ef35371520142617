"""Node 0's trial record: every node and rank gathered, the trial classified, the tool's output inspected, and
the record's identity (where the trial sits in its sweep and the condition it pairs on) assembled."""

from __future__ import annotations

import contextlib
from typing import Any, Dict

from ddpbench import __version__
from ddpbench.choices import TrialStatus
from ddpbench.cluster import NodePlan
from ddpbench.config import DdpbenchConfig
from ddpbench.formats import trial_record
from ddpbench.formats.condition import NON_CONDITION_KEYS, parse_overrides
from ddpbench.io import read_json
from ddpbench.trial import artifacts, environment
from ddpbench.trial import command as commands
from ddpbench.trial.attempts import Attempt
from ddpbench.trial.job import JobInfo
from ddpbench.trial.launch import Launched, utc_now
from ddpbench.trial.outcome import (apply_metrics, classify, first_failing_exit_code, read_rank_records,
                                   slowest_node_wall)
from ddpbench.trial.peers import peer_nodes
from ddpbench.trial.process import tail
from ddpbench.versions.arm import Arm


def condition_of(job: JobInfo) -> Dict[str, str]:
    """Every chosen or swept key except mode and repeat: what a pair shares."""
    condition = {key: job.choices.get(key, "") for key in ("cluster", "model", "stop")}
    for text, override in zip(job.overrides, parse_overrides(job.overrides)):
        key = override.key_or_group
        if key in NON_CONDITION_KEYS or key in condition:
            continue
        condition[key] = text.split("=", 1)[1] if "=" in text else ""  # the value as the user wrote it
    return condition


def trial_meta(cfg: DdpbenchConfig, job: JobInfo, *, started_at: str, ended_at: str, timeout_s: float) -> Dict[str, Any]:
    """The identity fields of a trial record: where it sits in its sweep and what it paired on."""
    condition = condition_of(job)
    return {
        "ddpbench_version": __version__,
        "sweep_dir": str(job.sweep_dir.resolve()),
        "job_dir": str(job.job_dir.resolve()),
        "job_num": job.job_num,
        "mode": cfg.mode.name,
        "repeat": cfg.decided.repeat,
        "pair_position": cfg.pair_position,
        "condition": condition,
        "condition_id": ",".join(f"{k}={v}" for k, v in condition.items()),
        "overrides": list(job.overrides),
        "started_at": started_at,
        "ended_at": ended_at,
        "timeout_s": timeout_s,
    }


def owner_record(cfg: DdpbenchConfig, arm: Arm, job: JobInfo, plan: NodePlan, timeout_s: float, attempt: Attempt,
                 plain: Dict[str, Any], launched: Launched) -> Dict[str, Any]:
    """Node 0's trial record: every node and rank gathered, the trial classified, the tool's output inspected."""
    ranks, rank_problems = read_rank_records(attempt.layout.metrics)
    nodes = {**launched.nodes, **peer_nodes(cfg, attempt.layout, plan, launched.nodes, ranks)}
    status, error = classify(launched.outcome.reason, timeout_s, nodes, ranks, cfg, rank_problems)
    metrics, status, error = apply_metrics(cfg, nodes, status, error)
    context = launched.context
    imported = next((r["tool"].get("version") for r in ranks if isinstance(r.get("tool"), dict)), None)
    tool = artifacts.inspect(cfg, context, [n.get("stderr") for n in nodes.values()], version=imported)
    status, error = artifacts.verdict(status, error, tool)
    wall_s, spawn_epoch = slowest_node_wall(nodes)
    ordered = [nodes[k] for k in sorted(nodes)]
    stderr_paths = [n.get("stderr") for n in ordered]
    summary_file = commands.summary_path(cfg, context) if context is not None else None
    summary = None
    if summary_file is not None:
        with contextlib.suppress(OSError, ValueError):
            summary = read_json(summary_file)
    meta = trial_meta(cfg, job, started_at=launched.started_at, ended_at=utc_now(), timeout_s=timeout_s)
    return trial_record.build_trial_record(
        meta={**meta, "arm": arm.section(cfg.mode.name, ranks)},
        config=plain,
        status=status,
        exit_code=None if status == TrialStatus.timeout else first_failing_exit_code(nodes),
        error=error,
        wall_s=wall_s,
        spawn_epoch=spawn_epoch,
        ranks=ranks,
        nodes=ordered,
        traceml=artifacts.summary_section(summary, str(summary_file) if summary_file else None),
        environment=environment.describe(ranks, [str(n.get("hostname")) for n in nodes.values()]),
        logs={"stdout": [n.get("stdout") for n in ordered], "stderr": stderr_paths,
              "tail": None if status == TrialStatus.ok else "\n".join(tail(p, 20) for p in stderr_paths if p)},
        metrics=metrics,
        tool=tool.to_record() if tool is not None else None,
        attempt=attempt.section(),
        load=launched.load,
    )
