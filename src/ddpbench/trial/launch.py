"""Launch a trial's node agents from a plan and wait for them: commands, live progress, one retry on a port clash."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Optional, Sequence, Set, Tuple


from ddpbench.cluster import NODE_RANK_TOKEN, NodePlan, backend_for, plan_nodes
from ddpbench.config import DdpbenchConfig
from ddpbench.formats.rank_record import rank_of_record_name
from ddpbench.io import unfinished_writes
from ddpbench.trial import artifacts, wrapped
from ddpbench.trial import command as commands
from ddpbench.trial.job import JobInfo
from ddpbench.trial.process import AgentResult, WaitOutcome, spawn_agent, stop_agent, tail, wait_agents

__all__ = ["LiveProgress", "launch", "launch_with_retry", "run_name"]


def launch(
    cfg: DdpbenchConfig, plan: NodePlan, run_name: str, deadline: float, attempt_dir: Path
) -> Tuple[WaitOutcome, Optional[commands.LaunchContext]]:
    """Start the plan's agents in ``attempt_dir`` and wait until ``deadline`` (monotonic); the outcome and the last context.

    The agents' working dir, logs, rank records and the tool's output (``{job_dir}`` in a mode) are the attempt's.
    """
    metrics_dir = attempt_dir / "metrics"
    metrics_dir.mkdir(parents=True, exist_ok=True)
    handles = []
    context = None
    try:
        for node_rank in plan.node_ranks:
            context = commands.make_context(
                cfg, node_rank=NODE_RANK_TOKEN if plan.agent_spans_nodes else node_rank,  # type: ignore[arg-type]
                master_addr=plan.master_addr, master_port=plan.master_port,
                aggregator_port=plan.aggregator_port, run_name=run_name, job_dir=attempt_dir,
            )
            artifacts.prepare(cfg, context)
            argv = commands.node_command(cfg, context)
            env = commands.node_environment(cfg, context)
            argv = backend_for(cfg).wrap_agent(cfg, plan, argv, attempt_dir)
            handles.append(spawn_agent(node_rank, argv, env, attempt_dir, attempt_dir / "logs"))
    except BaseException:
        for handle in handles:
            stop_agent(handle)
        raise
    progress = LiveProgress(handles[0].stdout_path) if handles and sys.stdout.isatty() else None
    try:
        outcome = wait_agents(handles, deadline, on_tick=progress.tick if progress else None)
    finally:  # every agent and rank of this driver is gone (wait_agents stops them on any exit)
        _remove_partial_records(metrics_dir, _own_ranks(cfg, plan))
    if progress is not None:
        progress.clear()
    for result in outcome.results:  # a wrapper (py-spy) exits 0 whatever its command did
        result.exit_code = wrapped.exit_code(result.exit_code, attempt_dir / "logs", result.node_rank)
    return outcome, context


def _own_ranks(cfg: DdpbenchConfig, plan: NodePlan) -> Optional[Set[int]]:
    """The global ranks this driver's agents run (node r: ranks r * nproc_per_node ...), or None when every
    writer in its metrics folder is its own (one agent over every node; a static node without a shared dir)."""
    if plan.agent_spans_nodes or not plan.peer_records:
        return None
    nproc = cfg.cluster.nproc_per_node
    return {node * nproc + local for node in plan.node_ranks for local in range(nproc)}


def _remove_partial_records(metrics_dir: Path, ranks: Optional[Set[int]]) -> None:
    """Delete the half-written temporaries of rank records that ranks killed mid-write left (``ranks``: whose;
    None: all). Finished records are never touched; another node's ranks may still be writing theirs."""
    for path, target in unfinished_writes(metrics_dir).items():
        rank = rank_of_record_name(target)
        if ranks is None or (rank is not None and rank in ranks):
            path.unlink(missing_ok=True)


class LiveProgress:
    """Shows rank 0's latest ``step=...`` line in place, for a terminal (never written to a pipe)."""

    def __init__(self, stdout_log: Path) -> None:
        self.stdout_log = stdout_log
        self.shown = ""
        self.last_check = 0.0

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


def launch_with_retry(
    cfg: DdpbenchConfig, job: JobInfo, plan: NodePlan, timeout_s: float, attempt_dir: Path
) -> Tuple[WaitOutcome, Optional[commands.LaunchContext]]:
    """Launch in ``attempt_dir`` and wait; relaunch once with fresh ports when a port was taken under us (local only)."""
    outcome, context = launch(cfg, plan, run_name(cfg, job, plan), time.monotonic() + timeout_s, attempt_dir)
    if outcome.reason != "timeout" and plan.retry_on_port_clash and _port_clash(outcome.results):
        plan = plan_nodes(cfg, job, timeout_s)
        shutil.rmtree(attempt_dir / "metrics", ignore_errors=True)
        outcome, context = launch(cfg, plan, run_name(cfg, job, plan), time.monotonic() + timeout_s, attempt_dir)
    return outcome, context


def run_name(cfg: DdpbenchConfig, job: JobInfo, plan: NodePlan) -> str:
    """TraceML's --run-name: new for every launch, the same on every node of the trial."""
    return f"{cfg.sweep_name}-{job.job_num}-{plan.run_token}"


def _port_clash(results: Sequence[AgentResult]) -> bool:
    if all(r.exit_code == 0 for r in results):
        return False
    return any("address already in use" in tail(r.stderr_path, 80).lower() for r in results)
