"""Launch a trial's node agents from a plan and wait for them: commands, pinning, live progress, one retry on a
port clash, and this driver's node entries."""

from __future__ import annotations

import datetime as dt
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from ddpbench.cluster import NODE_RANK_TOKEN, NodePlan, backend_for
from ddpbench.cluster.guarded import guard_footprint
from ddpbench.config import DdpbenchConfig
from ddpbench.formats import trial_record
from ddpbench.formats.layout import AttemptLayout
from ddpbench.formats.rank_record import rank_of_record_name
from ddpbench.io import unfinished_writes
from ddpbench.trial import artifacts, wrapped
from ddpbench.trial import command as commands
from ddpbench.trial import load as trial_load
from ddpbench.trial.job import JobInfo
from ddpbench.trial.pinning import trial_pinning
from ddpbench.trial.process import WaitOutcome, spawn_agent, stop_agent, tail, wait_agents
from ddpbench.versions.arm import Arm


@dataclass(frozen=True)
class Launched:
    """What launching this driver's agents gave: their results, the last launch context and what else ran."""

    outcome: WaitOutcome
    # the last agent's placeholders (None when nothing could be launched)
    context: Optional[commands.LaunchContext]
    # ISO time the launch started (UTC)
    started_at: str
    # the trial record's ``load`` section
    load: Dict[str, Any]
    # this driver's node entries, by node rank
    nodes: Dict[int, Dict[str, Any]]


def utc_now() -> str:
    """The time now (UTC, ISO 8601, to the second), as trial records keep it."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def launch_agents(cfg: DdpbenchConfig, arm: Arm, job: JobInfo, plan: NodePlan, timeout_s: float,
                  attempt: AttemptLayout) -> Launched:
    """Tell the other nodes, start this driver's agents (pinned) and wait for them, relaunching once with fresh ports
    when a port was taken under us (local only); their node entries."""
    backend_for(cfg).tell_peers(cfg, plan, job, resumed=False)
    started_at = utc_now()
    pins, load_start = trial_pinning(cfg), trial_load.sample()
    with pins.applied():
        outcome, context = launch(cfg, arm, job, plan, time.monotonic() + timeout_s, attempt)
        clash = not all(r.exit_code == 0 for r in outcome.results) and any(
            "address already in use" in tail(r.stderr_path, 80).lower() for r in outcome.results)
        if outcome.reason != "timeout" and plan.retry_on_port_clash and clash:
            plan = backend_for(cfg).plan(cfg, job, timeout_s)
            shutil.rmtree(attempt.metrics, ignore_errors=True)
            outcome, context = launch(cfg, arm, job, plan, time.monotonic() + timeout_s, attempt)
    load = trial_load.load_section(load_start, trial_load.sample(), n_cpus=len(pins.available),
                                   own_cpus=pins.own_cpus, cpu_affinity=pins.record())
    host = socket.gethostname()
    nodes = {r.node_rank: trial_record.node_entry(
        r.node_rank, host, wall_s=r.wall_s, exit_code=r.exit_code, spawn_epoch=r.spawn_epoch, exit_epoch=r.exit_epoch,
        killed_by=r.killed_by, stdout=r.stdout_path, stderr=r.stderr_path, footprint=r.footprint)
        for r in outcome.results}
    return Launched(outcome, context, started_at, load, nodes)


def launch(cfg: DdpbenchConfig, arm: Arm, job: JobInfo, plan: NodePlan, deadline: float,
           attempt: AttemptLayout) -> Tuple[WaitOutcome, Optional[commands.LaunchContext]]:
    """Start the plan's agents in ``attempt`` (``{job_dir}``) and wait until ``deadline`` (monotonic); the outcome and
    the last context."""
    attempt.metrics.mkdir(parents=True, exist_ok=True)
    run_name = f"{cfg.sweep_name}-{job.job_num}-{plan.run_token}"  # TraceML's: new per launch, the same on every node
    handles = []
    context = None
    wrapped_nodes = set()  # agents a backend runs elsewhere (SLURM's srun step): the guard here sees the wrapper only
    try:
        for node_rank in plan.node_ranks:
            context = commands.make_context(
                cfg, arm, node_rank=NODE_RANK_TOKEN if plan.agent_spans_nodes else node_rank,  # type: ignore[arg-type]
                master_addr=plan.master_addr, master_port=plan.master_port,
                aggregator_port=plan.aggregator_port, run_name=run_name, job_dir=attempt.root,
            )
            artifacts.prepare(cfg, context)
            argv = commands.node_command(cfg, arm, context)
            env = commands.node_environment(cfg, arm, context)
            agent = backend_for(cfg).wrap_agent(cfg, plan, argv, attempt)
            if agent != argv:
                wrapped_nodes.add(node_rank)
            argv = agent
            handles.append(spawn_agent(node_rank, argv, env, attempt))
    except BaseException:
        for handle in handles:
            stop_agent(handle)
        raise
    progress = LiveProgress(handles[0].stdout_path) if handles and sys.stdout.isatty() else None
    try:
        outcome = wait_agents(handles, deadline, on_tick=progress.tick if progress else None)
    finally:  # every agent and rank of this driver is gone (wait_agents stops them on any exit)
        _remove_partial_records(cfg, plan, attempt.metrics)
    if progress is not None:
        progress.clear()
    for result in outcome.results:  # a wrapper (py-spy) exits 0 whatever its command did
        result.exit_code = wrapped.exit_code(result.exit_code, attempt.command_status(result.node_rank))
        if result.node_rank in wrapped_nodes:  # the guard of the node's own step (SLURM's), else unknown
            result.footprint = guard_footprint(attempt.step_guard_record(result.node_rank))
    return outcome, context


def _remove_partial_records(cfg: DdpbenchConfig, plan: NodePlan, metrics_dir: Path) -> None:
    """Delete the half-written rank records this driver's ranks left when killed (another node's may still write)."""
    # every writer in the folder is this driver's: one agent over every node, or a static node without a shared dir
    all_own = plan.agent_spans_nodes or not plan.peer_records
    nproc = cfg.cluster.nproc_per_node
    own = {node * nproc + local for node in plan.node_ranks for local in range(nproc)}
    for path, target in unfinished_writes(metrics_dir).items():
        rank = rank_of_record_name(target)
        if all_own or (rank is not None and rank in own):
            path.unlink(missing_ok=True)


@dataclass
class LiveProgress:
    """Shows rank 0's latest ``step=...`` line in place, for a terminal (never written to a pipe)."""

    stdout_log: Path
    shown: str = ""
    last_check: float = 0.0

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.last_check < 0.5:
            return
        self.last_check = now
        lines = [line for line in tail(self.stdout_log, 5).splitlines() if line.startswith("step=")]
        if lines and lines[-1] != self.shown:
            self.shown = lines[-1]
            sys.stdout.write(f"\r    {self.shown[:100]}\x1b[K")
            sys.stdout.flush()

    def clear(self) -> None:
        if self.shown:
            sys.stdout.write("\r\x1b[K")
            sys.stdout.flush()
