"""Every trial of a sweep composed and checked before the first one starts."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Dict, List, Sequence, Tuple

from omegaconf import DictConfig

from ddpbench.config import DdpbenchConfig, typed, typed_trial
from ddpbench.errors import ConfigError
from ddpbench.formats.condition import parse_overrides

#: the keys by which the jobs of one condition and mode differ; no config value is derived from them by
#: interpolation, so a job's config is its condition's with these set
PER_JOB_KEYS = ("repeat", "pair_position")


def check_jobs(hydra_context: Any, config: DictConfig, jobs: Sequence[Sequence[str]]) -> List[DdpbenchConfig]:
    """Compose each job's config and check it (tool installed, command, cluster); the trial configs.

    Raises DdpbenchError (one line) at the first job that cannot run, before any job dir exists; every tool
    version's environment is built here, once.
    """
    from ddpbench.trial.checks import check_trial_config
    from ddpbench.versions.arm import prepare

    cfgs = composed_jobs(hydra_context, config, jobs)  # each one's values checked as it is converted
    prepare(cfgs)
    for cfg in cfgs:
        check_trial_config(cfg)
    return cfgs


def composed_jobs(hydra_context: Any, config: DictConfig, jobs: Sequence[Sequence[str]]) -> List[DdpbenchConfig]:
    """Each job's trial config (:func:`~ddpbench.config.typed_trial`: decided and checked; ConfigError), composed once
    per condition and mode (Hydra takes about 0.5 s a composition): the jobs of one condition and mode differ only in
    :data:`PER_JOB_KEYS`."""
    composed: Dict[Tuple[str, ...], DdpbenchConfig] = {}
    cfgs = []
    for overrides in jobs:
        parsed = parse_overrides(overrides)
        values: Dict[str, Any] = {o.key_or_group: o.value() for o in parsed if o.key_or_group in PER_JOB_KEYS}
        shared = tuple(text for text, o in zip(overrides, parsed) if o.key_or_group not in PER_JOB_KEYS)
        if shared not in composed:
            composed[shared] = typed(hydra_context.config_loader.load_sweep_config(config, list(shared)))
        cfgs.append(typed_trial(dataclasses.replace(copy.deepcopy(composed[shared]), **values)))  # nothing shared
    return cfgs


def check_baseline(baseline: str, cfgs: Sequence[DdpbenchConfig], explicit: bool) -> None:
    """Raise ConfigError when ``baseline`` names a mode the sweep does not run, if the sweep compares modes or the
    user set ``baseline=`` (``explicit``)."""
    modes = sorted({cfg.mode.name for cfg in cfgs})
    if baseline not in modes and (explicit or len(modes) > 1):
        raise ConfigError(f"baseline={baseline}: not a mode of this sweep (its modes: {', '.join(modes)})")
