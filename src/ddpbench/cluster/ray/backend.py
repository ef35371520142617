"""Ray backend (``cluster.kind: ray``), the driver side: a trial's node agents as Ray actors on a running cluster.

Each trial is ONE agent on this host, the trial process (:mod:`ddpbench.cluster.ray.trial_process`), which places
one actor per node (:mod:`ddpbench.cluster.ray.node`). The nodes must share the sweep dir; Ray is imported only
there, and only with ``cluster.kind: ray`` (docs/ray.md).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import Dict, List, Optional

from ddpbench.choices import Device
from ddpbench.cluster.base import Backend, NodePlan, TrialSlot, register
from ddpbench.cluster.ports import derived_ports
from ddpbench.config import DdpbenchConfig
from ddpbench.errors import ConfigError, DdpbenchError, ToolMissingError
from ddpbench.formats.layout import AttemptLayout

#: stands for the rendezvous address in a trial's node command; the trial process fills in bundle 0's node
MASTER_ADDR_TOKEN = "@DDPBENCH_RAY_MASTER_ADDR@"
#: the file ``ray start --head`` leaves with the address of the cluster it started on this host
RAY_CURRENT_CLUSTER = Path("/tmp/ray/ray_current_cluster")


def resolve_address(address: str, env: Optional[Dict[str, str]] = None) -> str:
    """HOST:PORT of the cluster ``address`` names (``auto``: ``$RAY_ADDRESS``, else ``ray start``'s file)."""
    e = os.environ if env is None else env
    value = str(address).strip()
    if value == "auto":
        value = str(e.get("RAY_ADDRESS") or "").strip()
        if not value and RAY_CURRENT_CLUSTER.is_file():
            value = RAY_CURRENT_CLUSTER.read_text().strip()
        if not value:
            raise ConfigError("cluster.ray.address=auto: RAY_ADDRESS is not set and no Ray cluster was started on "
                              "this host (start one and set it: eval \"$(scripts/ray-local.sh start)\"; or set "
                              "cluster.ray.address=HOST:PORT)")
    if value.startswith("ray://"):
        raise ConfigError(f"cluster.ray.address={value}: Ray Client addresses are not supported; give the GCS "
                          "address HOST:PORT (run ddpbench on a node of the cluster)")
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"cluster.ray.address={value!r}: must be HOST:PORT (a Ray cluster's GCS address) or auto")
    return value


def bundles(cfg: DdpbenchConfig) -> List[Dict[str, float]]:
    """One placement-group bundle per node rank: its CPUs, its GPUs (cuda) and ``node_resources[r]``."""
    c = cfg.cluster
    cpus = float(c.ray.cpus_per_node if c.ray.cpus_per_node is not None else c.nproc_per_node)
    gpus = {"GPU": float(c.nproc_per_node)} if c.device == Device.cuda else {}
    extra = [{str(k): float(v) for k, v in dict(resources).items()} for resources in c.ray.node_resources]
    return [{"CPU": cpus, **gpus, **(extra[r] if r < len(extra) else {})} for r in range(c.nnodes)]


class RayBackend(Backend):
    """One agent per trial on this host, the trial process, which places one actor per node on the Ray cluster."""

    kind = "ray"

    def validate(self, cfg: DdpbenchConfig) -> None:
        c = cfg.cluster
        if not c.shared_dir:
            raise ConfigError("cluster.shared_dir=false with cluster.kind=ray: every node writes its logs and rank "
                              "records into the sweep dir, so the Ray nodes must share it (set shared_dir=true)")
        if len(c.ray.node_resources) > c.nnodes:
            raise ConfigError(f"cluster.ray.node_resources: {len(c.ray.node_resources)} entries for "
                              f"cluster.nnodes={c.nnodes}; give at most one per node")
        for node_rank, extra in enumerate(c.ray.node_resources):
            bad = [k for k, v in dict(extra).items() if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0]
            if bad:
                raise ConfigError(f"cluster.ray.node_resources[{node_rank}].{bad[0]}: must be a number >= 0 (a Ray "
                                  "resource amount)")
        if c.ray.placement_timeout_s <= 0 or c.ray.connect_timeout_s <= 0:
            raise ConfigError("cluster.ray.placement_timeout_s and connect_timeout_s must be > 0")
        resolve_address(c.ray.address)

    def prepare_sweep(self, cfg: DdpbenchConfig) -> None:
        address = resolve_address(cfg.cluster.ray.address)
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=cfg.cluster.ray.connect_timeout_s):
                pass
        except OSError as error:
            raise DdpbenchError(f"cluster.kind=ray: the Ray cluster at {address} does not answer "
                                f"({error.strerror or error}); start it (eval \"$(scripts/ray-local.sh start)\") or "
                                "fix cluster.ray.address") from None
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ToolMissingError("cluster.kind=ray needs Ray: pip install 'ddpbench[ray]'") from None

    def plan(self, cfg: DdpbenchConfig, job: TrialSlot, timeout_s: float) -> NodePlan:
        token = uuid.uuid4().hex[:8]
        master_port, aggregator_port = derived_ports(f"ray-{token}", 2, cfg.cluster.base_port)
        if cfg.workload.trains is not None:  # workload=ray_train: Ray Train places its workers, one driver here
            return NodePlan(node_ranks=[0], master_addr="127.0.0.1", master_port=master_port,
                            aggregator_port=aggregator_port, owner=True, retry_on_port_clash=False, run_token=token,
                            peer_records=False)
        return NodePlan(node_ranks=[0], master_addr=MASTER_ADDR_TOKEN, master_port=master_port,
                        aggregator_port=aggregator_port, owner=True, retry_on_port_clash=True, run_token=token,
                        peer_record_wait_s=10.0, agent_spans_nodes=True)

    def wrap_agent(self, cfg: DdpbenchConfig, plan: NodePlan, argv: List[str], attempt: AttemptLayout) -> List[str]:
        if cfg.workload.trains is not None:
            return argv
        spec = {"address": resolve_address(cfg.cluster.ray.address), "bundles": bundles(cfg),
                "placement_timeout_s": float(cfg.cluster.ray.placement_timeout_s),
                "name": f"ddpbench-{plan.run_token}"}
        return [sys.executable, "-m", "ddpbench.cluster.ray.trial_process", "--job-dir", str(attempt.root),
                "--spec", json.dumps(spec), "--", *argv]


register(RayBackend())
