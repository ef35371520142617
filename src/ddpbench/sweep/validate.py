"""Every trial of a sweep composed and checked before the first one starts."""

from __future__ import annotations

from typing import Any, List, Sequence

from omegaconf import DictConfig, OmegaConf

from ddpbench.config import DdpbenchConfig, typed


def task_config(cfg: DictConfig) -> DictConfig:
    """A composed config without its ``hydra`` node: what a trial sees."""
    return OmegaConf.masked_copy(cfg, [str(k) for k in cfg.keys() if k != "hydra"])


def check_jobs(hydra_context: Any, config: DictConfig, jobs: Sequence[Sequence[str]]) -> List[DdpbenchConfig]:
    """Compose each job's config and check it (tool installed, command, cluster); the trial configs.

    Raises DdpbenchError (one line) at the first job that cannot run, before any job dir exists. The arms of a
    version comparison get their environments here (ddpbench.versions.arm.prepare).
    """
    from ddpbench.config import validate
    from ddpbench.trial.runner import check_trial_config
    from ddpbench.versions.arm import prepare

    cfgs = [typed(task_config(hydra_context.config_loader.load_sweep_config(config, list(overrides))))
            for overrides in jobs]
    for cfg in cfgs:
        validate(cfg)
    prepare(cfgs)  # every tool version's environment, built once, before anything runs
    for cfg in cfgs:
        check_trial_config(cfg)
    return cfgs


def prepare_jobs(cfgs: Sequence[DdpbenchConfig]) -> None:
    """Acquire what the trials' backends hold for the whole sweep (static node 0: its coordinator port).

    Raises DdpbenchError (one line) when that is impossible; nothing is written.
    """
    from ddpbench.cluster import prepare_sweep

    for cfg in cfgs:
        prepare_sweep(cfg)


def check_baseline(config: DictConfig, cfgs: Sequence[DdpbenchConfig], explicit: bool) -> None:
    """Raise ConfigError when ``baseline=`` names a mode the sweep does not run.

    Checked when the sweep compares modes (two or more) or when the user set ``baseline=`` on the command
    line; a one-mode sweep with the default baseline compares nothing and is left alone.
    """
    from ddpbench.errors import ConfigError

    modes = sorted({cfg.mode.name for cfg in cfgs})
    baseline = str(config.baseline)
    if baseline not in modes and (explicit or len(modes) > 1):
        raise ConfigError(f"baseline={baseline}: not a mode of this sweep (its modes: {', '.join(modes)})")
