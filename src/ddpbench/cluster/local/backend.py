"""Local backend (``cluster.kind: local``): every node agent of a trial on this host, ports chosen free at launch."""

from __future__ import annotations

import uuid

from ddpbench.cluster.base import Backend, NodePlan, TrialSlot, register
from ddpbench.cluster.ports import free_ports
from ddpbench.config import DdpbenchConfig


class LocalBackend(Backend):
    """This host runs all ``cluster.nnodes`` agents, rendezvous on loopback; nothing to validate or hold."""

    kind = "local"

    def plan(self, cfg: DdpbenchConfig, job: TrialSlot, timeout_s: float) -> NodePlan:
        master_port, aggregator_port = free_ports(2)
        return NodePlan(node_ranks=list(range(cfg.cluster.nnodes)), master_addr=cfg.cluster.master_addr,
                        master_port=master_port, aggregator_port=aggregator_port, owner=True,
                        retry_on_port_clash=True, run_token=uuid.uuid4().hex[:8])


register(LocalBackend())
