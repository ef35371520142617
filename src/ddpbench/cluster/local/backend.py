"""Local backend (``cluster.kind: local``): every node agent of a trial on this host, ports chosen free at launch."""

from __future__ import annotations

import uuid

from ddpbench.cluster.base import Backend, NodePlan, TrialSlot, register
from ddpbench.cluster.ports import free_ports
from ddpbench.config import DdpbenchConfig


def plan_local(cfg: DdpbenchConfig) -> NodePlan:
    """All ``cluster.nnodes`` agents here, rendezvous on loopback."""
    master_port, aggregator_port = free_ports(2)
    return NodePlan(
        node_ranks=list(range(cfg.cluster.nnodes)),
        master_addr=cfg.cluster.master_addr,
        master_port=master_port,
        aggregator_port=aggregator_port,
        owner=True,
        retry_on_port_clash=True,
        run_token=uuid.uuid4().hex[:8],
    )


class LocalBackend(Backend):
    """This host runs every node agent; nothing to validate or hold for a sweep."""

    kind = "local"

    def plan(self, cfg: DdpbenchConfig, job: TrialSlot, timeout_s: float) -> NodePlan:
        return plan_local(cfg)


register(LocalBackend())
