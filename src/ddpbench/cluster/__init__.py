"""Cluster backends: where a trial's node agents run and how they find each other.

Each backend turns the config into a :class:`NodePlan` for the driver that calls it:
``local`` runs every node agent of a trial on this host; ``slurm`` runs inside a SLURM task
(one per node), or, with ``cluster.slurm.one_allocation``, in the batch script of the sweep's one job,
where each trial is one ``srun`` step over every node (:mod:`ddpbench.cluster.slurm_steps`); ``static``
runs one ddpbench driver per node in lockstep.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, List, Optional

from omegaconf import DictConfig

if TYPE_CHECKING:
    from ddpbench.trial.job import JobInfo

#: stands for the node rank in an agent command that covers every node (see NodePlan.wrap_agent); each
#: node replaces it with its own SLURM_NODEID
NODE_RANK_TOKEN = "@DDPBENCH_NODE_RANK@"


@dataclass(frozen=True)
class NodePlan:
    """What this driver launches for one trial."""

    # node ranks whose agents this driver starts
    node_ranks: List[int]
    # rendezvous host (node 0)
    master_addr: str
    # torch rendezvous port
    master_port: int
    # a tool's aggregator port (TraceML)
    aggregator_port: int
    # whether this driver writes trial.json (node 0's driver)
    owner: bool
    # relaunch once with fresh ports when a port was taken between choosing and binding
    retry_on_port_clash: bool
    # identifies this launch; every node of the trial must get the same one (TraceML's --run-name)
    run_token: str
    # seconds node 0 waits, after its own agent ended, for the other nodes' records
    peer_record_wait_s: float = 30.0
    # where node 0 finds the other nodes' entries: "records" (nodes/node<r>.json in a shared job dir)
    # or "ranks" (inferred from the rank records gathered through the process group; agent wall unknown)
    peer_source: str = "records"
    # whether this driver may skip a trial whose trial.json is already ok (None = only the owner)
    resume: Optional[bool] = None
    # set when this driver must not launch the trial (its peers already left it): the trial fails
    skip_reason: Optional[str] = None
    # called right before the agents are launched (after an earlier attempt was set aside)
    on_launch: Optional[Callable[[], None]] = None
    # set when the one agent of node_ranks=[0] covers every node (an srun step, slurm one_allocation): its
    # command is rendered with node_rank = NODE_RANK_TOKEN, then wrapped by wrap_agent(argv, job_dir);
    # the other nodes write their own nodes/node<r>.json, which node 0 reads as usual
    wrap_agent: Optional[Callable[[List[str], Path], List[str]]] = None


def prepare_sweep(cfg: DictConfig) -> None:
    """Acquire what a backend holds for a whole sweep before its first trial (static: node 0's coordinator).

    Raises DdpbenchError (one line) when that is impossible, so the sweep stops before any job dir exists.
    """
    if str(cfg.cluster.kind) == "static" and int(cfg.cluster.node_rank) == 0:
        from ddpbench.cluster.static import coordinator_for, coordinator_port

        coordinator_for(str(cfg.sweep_name), coordinator_port(cfg))


def plan_nodes(cfg: DictConfig, job: "JobInfo") -> NodePlan:
    """The plan of ``cfg.cluster.kind`` for this driver."""
    kind = str(cfg.cluster.kind)
    if kind == "local":
        from ddpbench.cluster.local import plan_local

        return plan_local(cfg)
    if kind == "slurm" and bool(cfg.cluster.slurm.get("one_allocation", False)):
        from ddpbench.cluster.slurm_steps import plan_slurm_steps

        return plan_slurm_steps(cfg, job)
    if kind == "slurm":
        from ddpbench.cluster.slurm import plan_slurm

        return plan_slurm(cfg, job)
    from ddpbench.cluster.static import plan_static

    return plan_static(cfg, job)
