"""``workload=ray_train`` on the trial side (docs/ray.md): what it refuses before anything runs, and the command of
its one agent, the driver (:mod:`ddpbench.workload.ray_train`), which runs the mode's ``ray_trainer`` instead of its
``command`` and places the workers itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List

from ddpbench.choices import CpuAffinity, Device
from ddpbench.config import DdpbenchConfig
from ddpbench.errors import ConfigError, ToolMissingError
from ddpbench.trial.tool import module_found

#: cluster kinds a Ray Train workload runs on
KINDS = ("local", "ray")


def is_ray_train(cfg: DdpbenchConfig) -> bool:
    """Whether the workload is trained by Ray Train (``workload.trains`` set: workload=ray_train)."""
    return cfg.workload.trains is not None


def check(cfg: DdpbenchConfig) -> None:
    """Refuse, in one line, what a Ray Train workload cannot run: the mode, the cluster, a missing Ray."""
    if not is_ray_train(cfg):
        return
    from ddpbench.workload.ray_worker import BUILTIN_MODELS

    w, c, mode = cfg.workload, cfg.cluster, cfg.mode
    if w.trains not in BUILTIN_MODELS:
        raise ConfigError(f"workload.trains={w.trains!r}: must be one of {', '.join(BUILTIN_MODELS)}")
    spec = mode.ray_trainer
    if spec is None:
        raise ConfigError(f"mode={mode.name}: cannot run workload=ray_train (the mode names no ray_trainer; "
                          "native, native_aa, inject, traceml and traceml_manual can)")
    if not isinstance(spec.get("_target_"), str) or "." not in spec["_target_"]:
        raise ConfigError(f"mode.ray_trainer._target_={spec.get('_target_')!r}: must name the trainer class, "
                          "module.Class")
    if mode.wrapper:
        raise ConfigError(f"mode={mode.name}: a wrapper ({mode.wrapper[0]}) cannot reach Ray Train's workers")
    if c.kind not in KINDS:
        raise ConfigError(f"cluster.kind={c.kind}: workload=ray_train runs on cluster.kind=ray (a Ray cluster) or "
                          "local (a Ray instance of its own)")
    if c.kind == "local" and c.nnodes != 1:
        raise ConfigError(f"cluster.nnodes={c.nnodes}: a local Ray instance is one node; use a ray cluster "
                          "(cluster=ray_cpu_2node)")
    if c.device not in (Device.cpu, Device.cuda):
        raise ConfigError(f"cluster.device={c.device}: workload=ray_train needs cpu or cuda (use_gpu is decided "
                          "before Ray places the workers)")
    if c.ray.node_resources:
        raise ConfigError("cluster.ray.node_resources: Ray Train places workload=ray_train's workers itself; "
                          "leave it empty")
    if cfg.decided.cpu_affinity != CpuAffinity.none:
        raise ConfigError(f"cluster.cpu_affinity={c.cpu_affinity}: Ray places workload=ray_train's workers; "
                          "use none")
    if not (module_found("ray") and module_found("ray.train.torch")):
        raise ToolMissingError("workload=ray_train needs Ray Train, which is not installed: "
                               "pip install 'ddpbench[ray]'")
    module = spec["_target_"].rpartition(".")[0]
    if not module_found(module):
        raise ToolMissingError(f"mode={mode.name}: its ray_trainer's module {module} is not installed")


def _filled(value: Any, fill: Any) -> Any:
    if isinstance(value, str):
        return fill(value)
    if isinstance(value, dict):
        return {k: _filled(v, fill) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, fill) for v in value]
    return value


def driver_command(cfg: DdpbenchConfig, python: str, storage: Path, run_name: str, fill: Any,
                   workload_args: List[str]) -> List[str]:
    """The driver's argv: the mode's trainer (placeholders filled by ``fill``), the scaling, then the harness's args;
    ``storage``: Ray Train's run storage."""
    from ddpbench.cluster.ray.backend import resolve_address

    c = cfg.cluster
    assert cfg.mode.ray_trainer is not None and cfg.workload.trains is not None
    world = c.nnodes * c.nproc_per_node
    cpus = float(c.ray.cpus_per_node) / c.nproc_per_node if c.ray.cpus_per_node is not None else 1.0
    address = resolve_address(str(c.ray.address)) if c.kind == "ray" else "local"
    # ScalingConfig.placement_strategy: every worker on one node (one node), one per node, or spread
    placement = "STRICT_PACK" if c.nnodes == 1 else "STRICT_SPREAD" if c.nproc_per_node == 1 else "SPREAD"
    argv = [python, "-m", "ddpbench.workload.ray_train", f"--trains={cfg.workload.trains}",
            f"--trainer={json.dumps(_filled(dict(cfg.mode.ray_trainer), fill))}", f"--num-workers={world}",
            f"--cpus-per-worker={cpus:g}", f"--placement={placement}", f"--backend={cfg.decided.backend}",
            f"--collective-timeout-sec={cfg.trial.collective_timeout_s:g}", f"--address={address}",
            f"--storage={storage}", f"--name={run_name}"]
    if c.device == Device.cuda:
        argv.append("--use-gpu")
    return argv + ["--", *workload_args]
