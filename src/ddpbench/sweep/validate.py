"""Every trial of a sweep composed and checked before the first one starts."""

from __future__ import annotations

from typing import Any, List, Sequence

from omegaconf import DictConfig, OmegaConf


def task_config(cfg: DictConfig) -> DictConfig:
    """A composed config without its ``hydra`` node: what a trial sees."""
    return OmegaConf.masked_copy(cfg, [str(k) for k in cfg.keys() if k != "hydra"])


def check_jobs(hydra_context: Any, config: DictConfig, jobs: Sequence[Sequence[str]]) -> List[DictConfig]:
    """Compose each job's config and check it (tool installed, command, cluster); the trial configs.

    Raises DdpbenchError (one line) at the first job that cannot run, before any job dir exists.
    """
    from ddpbench.cluster import prepare_sweep
    from ddpbench.trial.runner import check_trial_config

    cfgs = []
    for overrides in jobs:
        cfg = task_config(hydra_context.config_loader.load_sweep_config(config, list(overrides)))
        check_trial_config(cfg)
        prepare_sweep(cfg)
        cfgs.append(cfg)
    return cfgs
