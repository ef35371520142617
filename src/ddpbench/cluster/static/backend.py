"""Static backend: one ddpbench driver per node, no scheduler, the same sweep command everywhere.

Every node runs ``python -m ddpbench -m ... cluster=static_2node cluster.node_rank=R cluster.master_addr=NODE0
sweep_name=SAME``; job number k names the same trial on every node. Ports per trial, the bounded rendezvous,
node 0's coordinator and the peer records: docs/multinode.md.
"""

from __future__ import annotations

import hashlib
import re
from typing import Dict, List, Tuple

from ddpbench.cluster.base import Backend, NodePlan, TrialSlot, register
from ddpbench.cluster.ports import derived_ports
from ddpbench.cluster.static.coordinator import coordinator_for, wait_for_owner
from ddpbench.config import DdpbenchConfig
from ddpbench.errors import ConfigError

#: extra seconds node 0 waits for a peer's node record beyond the rendezvous timeout
PEER_RECORD_MARGIN_S = 5.0
#: the sweep names the app makes up when none is given (``ddpbench_unique``)
_GENERATED_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}_\d+$")


def validate_static(cfg: DdpbenchConfig) -> None:
    """Rules of ``cluster.kind=static``; raise ConfigError with one line."""
    c = cfg.cluster
    if not c.master_addr.strip():
        raise ConfigError("cluster.master_addr: set it to node 0's address (the same on every node)")
    if c.rendezvous_timeout_s < 10:
        raise ConfigError(f"cluster.rendezvous_timeout_s={c.rendezvous_timeout_s!r}: must be >= 10 with cluster.kind=static")
    if c.nnodes > 1 and _GENERATED_NAME.match(cfg.sweep_name):
        raise ConfigError(
            "sweep_name: cluster.kind=static needs the same sweep_name=NAME on every node's command line "
            "(it names the sweep dir and derives the ports)"
        )
    if c.nnodes > 1 and not c.shared_dir and cfg.mode.needs_shared_dir:
        raise ConfigError(
            f"mode={cfg.mode.name} with cluster.shared_dir=false: TraceML 0.5 needs its --logs-dir (inside the "
            "sweep dir) on storage every node sees; put the sweep dir on NFS/EFS and set cluster.shared_dir=true, "
            "or sweep modes without it"
        )


def coordinator_port(cfg: DdpbenchConfig) -> int:
    """The port node 0's driver serves its trial position on, for the whole sweep."""
    return cfg.cluster.base_port or derived_ports(f"{cfg.sweep_name}/coordinator", 1)[0]


def trial_ports(cfg: DdpbenchConfig, job_num: int) -> Tuple[int, int]:
    """(rendezvous port, aggregator port) of trial ``job_num``, alike on every node."""
    base = cfg.cluster.base_port
    if base:
        start = base + 1 + 2 * job_num
        if start + 1 > 65535:
            raise ConfigError(
                f"cluster.base_port={base}: trial {job_num} would need port {start + 1} (> 65535); lower base_port"
            )
        return start, start + 1
    coordinator = coordinator_port(cfg)
    key = f"{cfg.sweep_name}/{job_num}"
    ports = derived_ports(key, 2)
    salt = 0
    while coordinator in ports:
        salt += 1
        ports = derived_ports(f"{key}/{salt}", 2)
    return ports[0], ports[1]


class StaticBackend(Backend):
    """One driver per node, no scheduler; node 0 coordinates and writes the trial records and the report."""

    kind = "static"

    def validate(self, cfg: DdpbenchConfig) -> None:
        validate_static(cfg)

    def prepare_sweep(self, cfg: DdpbenchConfig) -> None:
        if cfg.cluster.node_rank == 0:
            coordinator_for(cfg.sweep_name, coordinator_port(cfg), cfg.cluster.master_addr)

    def plan(self, cfg: DdpbenchConfig, job: TrialSlot, timeout_s: float) -> NodePlan:
        c, trial = cfg.cluster, job.job_num
        join_s = c.rendezvous_timeout_s
        peer_wait_s = join_s + PEER_RECORD_MARGIN_S if c.shared_dir else 0.0
        master_port, aggregator_port = trial_ports(cfg, trial)
        port = coordinator_port(cfg)
        owner = c.node_rank == 0
        token = hashlib.sha256(f"{cfg.sweep_name}/{trial}".encode()).hexdigest()[:8]  # alike on every node
        if owner:
            coordinator_for(cfg.sweep_name, port, c.master_addr)
            skip_reason = None
        else:
            behind_s = timeout_s + peer_wait_s + join_s + 30.0
            skip_reason = wait_for_owner(c.master_addr, port, cfg.sweep_name, c.node_rank, trial, join_s, behind_s)
        return NodePlan(node_ranks=[c.node_rank], master_addr=c.master_addr, master_port=master_port,
                        aggregator_port=aggregator_port, owner=owner, retry_on_port_clash=False,
                        run_token=token, peer_record_wait_s=peer_wait_s,
                        peer_records=c.shared_dir, resume=c.shared_dir, skip_reason=skip_reason)

    def tell_peers(self, cfg: DdpbenchConfig, plan: NodePlan, job: TrialSlot, resumed: bool) -> None:
        if plan.owner and not resumed:  # the other nodes may join this trial now
            coordinator_for(cfg.sweep_name, coordinator_port(cfg), cfg.cluster.master_addr).open(job.job_num)

    def rendezvous_env(self, cfg: DdpbenchConfig, run_name: str) -> Dict[str, str]:
        """torchrun settings every node agent gets (also through ``traceml run``): bounded join, trial id."""
        return {"PET_RDZV_CONF": f"timeout={int(round(cfg.cluster.rendezvous_timeout_s))}", "PET_RDZV_ID": run_name}

    def workload_args(self, cfg: DdpbenchConfig) -> List[str]:
        # without a shared dir node 0 cannot read the other nodes' rank records: rank 0 writes every rank's
        return [] if cfg.cluster.shared_dir else ["--gather-metrics"]

    def writes_report(self, cfg: DdpbenchConfig) -> bool:
        return cfg.cluster.node_rank == 0


register(StaticBackend())
