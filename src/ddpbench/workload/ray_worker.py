"""One Ray Train worker of ``workload=ray_train``: ddpbench's harness loop inside ``train_loop_per_worker``, on the
process group Ray Train made; its rank record adds ``ray_startup_s`` (the driver's start to this worker's loop;
docs/ray.md)."""

from __future__ import annotations

import importlib
import os
import time
from typing import Any, Dict, Mapping

from ddpbench.workload.base import Workload

#: the built-in models a Ray Train worker can train: name -> (module, class)
BUILTIN_MODELS: Dict[str, tuple[str, str]] = {
    "mlp": ("ddpbench.workload.ddp_mlp", "MLP"),
    "transformer": ("ddpbench.workload.ddp_transformer", "Transformer"),
    "convnet": ("ddpbench.workload.ddp_convnet", "ConvNet"),
}


def builtin_workload(name: str) -> Workload[Any]:
    """The built-in model ``name`` (a key of :data:`BUILTIN_MODELS`)."""
    module, cls = BUILTIN_MODELS[name]
    workload: Workload[Any] = getattr(importlib.import_module(module), cls)()
    return workload


def _rank_environment() -> Dict[str, str]:
    """This worker's placement from Ray Train's context, as torchrun would have set it; the node rank by Ray node."""
    from ray import train

    ctx = train.get_context()
    return {"RANK": str(ctx.get_world_rank()), "LOCAL_RANK": str(ctx.get_local_rank()),
            "WORLD_SIZE": str(ctx.get_world_size()), "LOCAL_WORLD_SIZE": str(ctx.get_local_world_size()),
            "GROUP_RANK": str(_ray_node_rank())}


def _ray_node_rank() -> int:
    """The index of this worker's Ray node among the trial's nodes, in world-rank order, by Ray node id (Ray Train's
    by IP address would make two Ray nodes on one host both node 0); one all-gather on gloo."""
    import ray
    import torch.distributed as dist

    mine = ray.get_runtime_context().get_node_id()
    everyone: list[Any] = [None] * dist.get_world_size()
    group = dist.new_group(backend="gloo") if dist.get_backend() != "gloo" else None
    dist.all_gather_object(everyone, mine, group=group)
    return list(dict.fromkeys(everyone)).index(mine)


def train_loop_per_worker(config: Mapping[str, Any]) -> None:
    """Train the model ``config["trains"]`` (a :data:`BUILTIN_MODELS` name) on this worker with ``config["argv"]``,
    the driver's ``env`` set; write its rank record (``driver_start``: the driver's start, epoch s)."""
    entered = time.time()
    from ddpbench.workload.args import parse_args
    from ddpbench.workload.harness import train
    from ddpbench.workload.runtime import init_traceml

    os.environ.update({str(k): str(v) for k, v in dict(config.get("env") or {}).items()})
    os.environ.update(_rank_environment())
    workload = builtin_workload(str(config["trains"]))
    args = parse_args(workload, list(config["argv"]))
    startup = {"ray_startup_s": max(0.0, entered - float(config["driver_start"]))}
    trace_step = init_traceml(args, init=False)  # TraceML's trainer started its runtime in this worker
    code = train(workload, args, trace_step, process_start_epoch=entered, extra_record=startup)
    if code != 0:
        raise RuntimeError(f"rank {os.environ['RANK']}: the harness returned {code}")
