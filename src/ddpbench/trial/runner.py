"""Run one trial, the body of one Hydra job: the flow from the checks to node 0's trial.json (a module per step). A
crash, hang or timeout becomes a ``failed``/``timeout`` record; only bad input raises, before anything launches."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Mapping, Optional

from ddpbench.choices import StopKind
from ddpbench.cluster import NodePlan, backend_for
from ddpbench.config import DdpbenchConfig
from ddpbench.formats.trial_record import TRIAL_FILE, config_hash
from ddpbench.io import write_json_atomic
from ddpbench.trial.attempts import attempt_for, previous_ok
from ddpbench.trial.checks import check_trial_config
from ddpbench.trial.job import JobInfo
from ddpbench.trial.launch import launch_agents
from ddpbench.trial.peers import node_done, report_to_owner, skip_node
from ddpbench.trial.record import owner_record
from ddpbench.trial.summary import TrialOutcome, TrialRecord


def trial_timeout_s(cfg: DdpbenchConfig) -> float:
    """The watchdog limit: ``trial.timeout_s`` or expected duration * factor + margin."""
    if cfg.trial.timeout_s is not None:
        return cfg.trial.timeout_s
    if cfg.stop.kind == StopKind.steps:
        expected = ((cfg.stop.steps or 0) + cfg.stop.warmup_steps) * cfg.trial.expected_step_s
    else:
        expected = (cfg.stop.duration_sec or 0.0) + cfg.stop.warmup_steps * cfg.trial.expected_step_s
    injected = cfg.inject.startup_s + cfg.inject.teardown_s if cfg.mode.workload_args else 0.0
    return expected * cfg.trial.timeout_factor + cfg.trial.timeout_margin_s + injected


def run_trial(cfg: DdpbenchConfig, job: JobInfo) -> TrialOutcome:
    """Run the trial ``cfg`` describes in ``job.job_dir``: node 0's trial record (on disk too) or a peer's NodeDone."""
    arm = check_trial_config(cfg)
    cfg = arm.configured(cfg)
    plain = asdict(cfg)
    job.job_dir.mkdir(parents=True, exist_ok=True)
    timeout_s = trial_timeout_s(cfg)
    plan = backend_for(cfg).plan(cfg, job, timeout_s)
    resumed = resume(cfg, job, plan, plain)
    if resumed is not None:
        return resumed
    attempt = attempt_for(job.job_dir, plan)  # this launch's own folder: attempts/<n>/
    if plan.skip_reason is not None:
        return skip_node(cfg, job, plan, attempt.layout)
    launched = launch_agents(cfg, arm, job, plan, timeout_s, attempt.layout)
    if not plan.owner:
        return report_to_owner(cfg, plan, attempt.layout, launched)
    trial = owner_record(cfg, arm, job, plan, timeout_s, attempt, plain, launched)
    write_json_atomic(job.job_dir / TRIAL_FILE, trial)
    return TrialRecord(trial)


def resume(cfg: DdpbenchConfig, job: JobInfo, plan: NodePlan, plain: Mapping[str, Any]) -> Optional[TrialOutcome]:
    """The outcome of a trial already done (node 0 keeps its ok record and tells the others), else None."""
    if backend_for(cfg).owner_resumed(cfg, plan, job):
        return node_done(cfg, plan, node_ok=True)  # node 0 resumes an ok trial: nothing to launch here
    may_resume = plan.owner if plan.resume is None else plan.resume
    previous = previous_ok(job.job_dir, config_hash(plain)) if may_resume and cfg.trial.resume else None
    if previous is None:
        return None
    backend_for(cfg).tell_peers(cfg, plan, job, resumed=True)
    return TrialRecord(previous, resumed=True)
