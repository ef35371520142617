"""SLURM backend (``cluster.kind: slurm``): this driver is one SLURM task of a job with one task per node.

hydra-submitit-launcher (``hydra/launcher=ddpbench_slurm``) submits one job per trial with
``nodes = cluster.nnodes`` and ``tasks_per_node = 1``; the Hydra job function runs once per task, i.e.
once per node. Each task starts its own node's torchrun / ``traceml run`` agent:

- node rank = ``SLURM_NODEID``; master address = the first host of the allocation
  (:mod:`ddpbench.cluster.slurm_env`);
- ports derived from the SLURM job id, so every node computes the same ones and two concurrent jobs
  (on shared nodes) differ; ``cluster.base_port`` pins them instead;
- run token = the SLURM job id (TraceML's ``--run-name`` is the same on every node);
- node 0 owns the trial (writes ``trial.json``); the others write ``nodes/node<r>.json``.

Node 0 also prepares the job dir (moves an earlier attempt's files aside, or decides to resume) *before*
any other node touches it: it announces its decision in ``.slurm/<job id>.ready`` and the other nodes wait
for that marker (bounded), so node 0 never moves a peer's fresh logs and a resumed trial launches nothing.

With ``cluster.slurm.one_allocation=true`` the whole sweep runs inside one job instead
(:mod:`ddpbench.cluster.slurm_steps`).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Mapping, Optional

from ddpbench.cluster.base import LAUNCH, Backend, NodePlan, TrialSlot, register
from ddpbench.cluster.ports import derived_ports
from ddpbench.cluster.slurm_env import SlurmTask, allocation_hosts
from ddpbench.cluster.slurm_steps import plan_slurm_steps
from ddpbench.config import DdpbenchConfig
from ddpbench.errors import DdpbenchError
from ddpbench.io import read_json, write_json_atomic

#: seconds a non-zero node waits for node 0 to have prepared the job dir
READY_WAIT_S = 120.0


def _ready_marker(job_dir: Path, job_id: str) -> Path:
    return job_dir / ".slurm" / f"{job_id}.ready"


def _announce(job_dir: Path, job_id: str, decision: str) -> None:
    """Node 0: the job dir is ready; ``decision`` tells the other nodes whether to launch."""
    write_json_atomic(_ready_marker(job_dir, job_id), {"decision": decision, "time": time.time()})


def _await_owner(job_dir: Path, job_id: str, timeout: float = READY_WAIT_S) -> str:
    """A non-zero node: wait (bounded) for node 0's marker; its decision."""
    marker = _ready_marker(job_dir, job_id)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return str(read_json(marker).get("decision", LAUNCH))
        except (OSError, ValueError, AttributeError):
            pass
        if time.monotonic() >= deadline:
            raise DdpbenchError(f"cluster.kind=slurm: node 0 of SLURM job {job_id} did not prepare "
                                f"{job_dir} within {timeout:g} s (no {marker.name})")
        time.sleep(0.2)


def plan_slurm(cfg: DdpbenchConfig, job: TrialSlot, env: Optional[Mapping[str, str]] = None) -> NodePlan:
    """This SLURM task's node plan (one task per node; node 0 owns the trial)."""
    task = SlurmTask.from_env(env)
    if not task.in_step:
        raise DdpbenchError(
            "cluster.kind=slurm runs inside a SLURM job (SLURM_JOB_ID/SLURM_NODEID are not set): run a sweep "
            "with -m so the ddpbench_slurm launcher submits it, or use a local cluster"
        )
    assert task.node_rank is not None
    task.check_nodes(int(cfg.cluster.nnodes), "submit with hydra.launcher.nodes=cluster.nnodes")
    if task.num_tasks and task.num_nodes and task.num_tasks != task.num_nodes:
        raise DdpbenchError(f"SLURM job {task.job_id} runs {task.num_tasks} tasks on {task.num_nodes} node(s); "
                            "ddpbench needs exactly one task per node (hydra.launcher.tasks_per_node=1)")
    master_addr = allocation_hosts(task.nodelist)[0] if task.nodelist else "127.0.0.1"
    master_port, aggregator_port = derived_ports(task.job_id, 2, int(cfg.cluster.base_port))
    owner = task.node_rank == 0
    return NodePlan(
        node_ranks=[task.node_rank],
        master_addr=master_addr,
        master_port=master_port,
        aggregator_port=aggregator_port,
        owner=owner,
        retry_on_port_clash=False,
        run_token=task.job_id,
        peer_record_wait_s=float(cfg.cluster.slurm.peer_record_wait_s),
        announce=functools.partial(_announce, job.job_dir, task.job_id) if owner else None,
        await_owner=None if owner else functools.partial(_await_owner, job.job_dir, task.job_id),
    )


class SlurmBackend(Backend):
    """One SLURM job per trial (a task per node), or the whole sweep in one allocation (``one_allocation``)."""

    kind = "slurm"

    def plan(self, cfg: DdpbenchConfig, job: TrialSlot, timeout_s: float) -> NodePlan:
        if cfg.cluster.slurm.one_allocation:
            return plan_slurm_steps(cfg, job)
        return plan_slurm(cfg, job)


register(SlurmBackend())
