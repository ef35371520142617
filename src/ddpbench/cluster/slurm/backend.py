"""SLURM backend (``cluster.kind: slurm``): this driver runs inside a SLURM job (docs/slurm.md).

One job per trial, a task per node: node rank = ``SLURM_NODEID``, ports derived from the job id; node 0 prepares
the job dir, then tells the others in ``.slurm/<job id>.ready``. ``cluster.slurm.one_allocation``: each trial is
one srun step over every node (:mod:`ddpbench.cluster.slurm.steps`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Mapping, Optional

from ddpbench.cluster.base import Backend, NodePlan, TrialSlot, register
from ddpbench.cluster.ports import derived_ports
from ddpbench.config import DdpbenchConfig
from ddpbench.errors import DdpbenchError
from ddpbench.formats.layout import AttemptLayout
from ddpbench.io import read_json, write_json_atomic

#: seconds a non-zero node waits for node 0 to have prepared the job dir
READY_WAIT_S = 120.0
#: seconds ``scontrol show hostnames`` may take
SCONTROL_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class SlurmTask:
    """Where this process sits in its SLURM job (empty/zero fields: not set by SLURM)."""

    # the job id ("" outside a job)
    job_id: str
    # this task's node index in the allocation (None outside a job step)
    node_rank: Optional[int]
    # nodes of the allocation (0 = unknown)
    num_nodes: int
    # tasks of the job step (0 = unknown)
    num_tasks: int
    # the allocation's node list in SLURM's compressed syntax ("" = unknown)
    nodelist: str

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "SlurmTask":
        """Read the task from ``env`` (default: this process's environment; older SLURM aliases too)."""
        e = os.environ if env is None else env
        node = e.get("SLURM_NODEID")
        return cls(
            job_id=str(e.get("SLURM_JOB_ID") or ""),
            node_rank=int(node) if node else None,
            num_nodes=int(e.get("SLURM_JOB_NUM_NODES") or e.get("SLURM_NNODES") or 0),
            num_tasks=int(e.get("SLURM_NTASKS") or 0),
            nodelist=str(e.get("SLURM_JOB_NODELIST") or e.get("SLURM_NODELIST") or ""),
        )

    def check_nodes(self, nnodes: int, hint: str = "") -> None:
        """Raise DdpbenchError when the allocation's node count is known and differs from ``nnodes``."""
        if self.num_nodes and self.num_nodes != nnodes:
            raise DdpbenchError(f"cluster.nnodes={nnodes} but SLURM job {self.job_id} has {self.num_nodes} "
                                f"node(s)" + (f": {hint}" if hint else ""))


def allocation_hosts(nodelist: str, timeout: float = SCONTROL_TIMEOUT_S) -> List[str]:
    """The hosts of a SLURM node list (``n[1-2]`` -> ``["n1", "n2"]``), via ``scontrol`` (bounded)."""
    try:
        proc = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise DdpbenchError("cluster.kind=slurm: scontrol not found on PATH inside the SLURM job") from exc
    except subprocess.TimeoutExpired as exc:
        raise DdpbenchError(f"cluster.kind=slurm: 'scontrol show hostnames {nodelist}' took longer than "
                            f"{timeout:g} s") from exc
    hosts = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not hosts:
        detail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise DdpbenchError(f"cluster.kind=slurm: 'scontrol show hostnames {nodelist}' failed: {detail}")
    return hosts


def _ready_marker(job: TrialSlot, plan: NodePlan) -> Path:
    return job.job_dir / ".slurm" / f"{plan.run_token}.ready"  # the run token is the SLURM job id


class SlurmBackend(Backend):
    """One SLURM job per trial (a task per node), or the whole sweep in one allocation (``one_allocation``)."""

    kind = "slurm"

    def plan(self, cfg: DdpbenchConfig, job: TrialSlot, timeout_s: float, env: Optional[Mapping[str, str]] = None
             ) -> NodePlan:
        task = SlurmTask.from_env(env)
        one_allocation = cfg.cluster.slurm.one_allocation
        if one_allocation:
            if not task.job_id:
                raise DdpbenchError(
                    "cluster.slurm.one_allocation=true runs the sweep inside its own SLURM job (SLURM_JOB_ID is "
                    "not set): run the sweep with -m and the ddpbench launcher, which submits that job")
            task.check_nodes(cfg.cluster.nnodes)
            node_rank, port_key = 0, f"{task.job_id}-{job.job_num}"
        else:
            if not task.job_id or task.node_rank is None:
                raise DdpbenchError(
                    "cluster.kind=slurm runs inside a SLURM job (SLURM_JOB_ID/SLURM_NODEID are not set): run a "
                    "sweep with -m so the ddpbench launcher submits it, or use a local cluster")
            task.check_nodes(cfg.cluster.nnodes, "submit with hydra.launcher.nodes=cluster.nnodes")
            if task.num_tasks and task.num_nodes and task.num_tasks != task.num_nodes:
                raise DdpbenchError(f"SLURM job {task.job_id} runs {task.num_tasks} tasks on {task.num_nodes} "
                                    "node(s); ddpbench needs exactly one task per node "
                                    "(hydra.launcher.tasks_per_node=1)")
            node_rank, port_key = task.node_rank, task.job_id
        ports = derived_ports(port_key, 2, cfg.cluster.base_port)
        master_addr = allocation_hosts(task.nodelist)[0] if task.nodelist else "127.0.0.1"  # the first host
        return NodePlan(node_ranks=[node_rank], master_addr=master_addr, master_port=ports[0],
                        aggregator_port=ports[1], owner=node_rank == 0, retry_on_port_clash=False,
                        run_token=task.job_id, peer_record_wait_s=cfg.cluster.slurm.peer_record_wait_s,
                        agent_spans_nodes=one_allocation)

    def owner_resumed(self, cfg: DdpbenchConfig, plan: NodePlan, job: TrialSlot) -> bool:
        """A non-zero node of a job: wait (bounded) for node 0's marker; whether it resumed the trial."""
        if plan.owner:
            return False
        marker = _ready_marker(job, plan)
        deadline = time.monotonic() + READY_WAIT_S
        while True:
            try:
                return read_json(marker).get("decision") == "resumed"
            except (OSError, ValueError, AttributeError):
                pass
            if time.monotonic() >= deadline:
                raise DdpbenchError(f"cluster.kind=slurm: node 0 of SLURM job {plan.run_token} did not prepare "
                                    f"{job.job_dir} within {READY_WAIT_S:g} s (no {marker.name})")
            time.sleep(0.2)

    def tell_peers(self, cfg: DdpbenchConfig, plan: NodePlan, job: TrialSlot, resumed: bool) -> None:
        """Node 0 of a job: the job dir is ready; the marker tells the other nodes whether to launch."""
        if plan.owner and not plan.agent_spans_nodes:
            write_json_atomic(_ready_marker(job, plan), {"decision": "resumed" if resumed else "launch",
                                                         "time": time.time()})

    def wrap_agent(self, cfg: DdpbenchConfig, plan: NodePlan, argv: List[str], attempt: AttemptLayout) -> List[str]:
        """One allocation: ``argv`` as one srun step over every node, one task each (:mod:`ddpbench.cluster.slurm.steps`)."""
        if not plan.agent_spans_nodes:
            return argv
        slurm = cfg.cluster.slurm
        step = ["srun", f"--nodes={cfg.cluster.nnodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
        if slurm.cpus_per_task:
            step.append(f"--cpus-per-task={slurm.cpus_per_task}")  # 22.05's srun does not inherit it from sbatch
        if slurm.gpus_per_node:
            step.append(f"--gpus-per-node={slurm.gpus_per_node}")
        return [*step, sys.executable, "-m", "ddpbench.cluster.slurm.steps", "--job-dir", str(attempt.root), "--", *argv]


register(SlurmBackend())
