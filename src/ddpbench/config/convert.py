"""The one conversion of a composed config into the schema's dataclasses (:func:`typed`; back to plain containers:
``dataclasses.asdict``), and the schema's registration with Hydra (:func:`register_configs`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ddpbench.config.schema import DdpbenchConfig
from ddpbench.errors import ConfigError
from ddpbench.formats.condition import NOT_IN_JOB_DIR, arm_name


def register_configs() -> None:
    """Register the schema so ``config.yaml``'s defaults list can name it, and the keys no job dir names."""
    if not OmegaConf.has_resolver("ddpbench_not_in_job_dir"):
        OmegaConf.register_new_resolver("ddpbench_not_in_job_dir", lambda: list(NOT_IN_JOB_DIR))
    schema = OmegaConf.structured(DdpbenchConfig)
    for key in ("workload.metrics", "workload.units", "versions"):  # user-named keys: `workload.metrics.NAME=...`, no `+`
        OmegaConf.set_struct(OmegaConf.select(schema, key), False)
    ConfigStore.instance().store(name="ddpbench_schema", node=schema)


def typed(cfg: DictConfig) -> DdpbenchConfig:
    """A composed config (with or without the schema's type and Hydra's ``hydra`` node) as the schema's dataclasses,
    every value resolved: once per process, where Hydra hands it over. ConfigError (one line, naming the key) for a
    missing, mistyped or unresolvable value."""
    try:
        if "hydra" in cfg:  # what a trial sees: the config without Hydra's own settings
            cfg = OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"])
        node = cfg if OmegaConf.get_type(cfg) is DdpbenchConfig else OmegaConf.merge(OmegaConf.structured(DdpbenchConfig), cfg)
        converted = OmegaConf.to_object(node)
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None)
        message = str(getattr(error, "msg", None) or error).splitlines()[0]
        raise ConfigError(f"{key}: {message}" if key else message) from None
    assert isinstance(converted, DdpbenchConfig)
    unknown = unknown_key(converted)
    if unknown is not None:
        raise ConfigError(unknown)
    if converted.version is not None:  # the arm is named by its tool version: traceml==0.4.2
        converted.mode.name = arm_name(converted.mode.name, converted.version)
    return converted


def unknown_key(value: Any, prefix: str = "") -> Optional[str]:
    """``group.key: Key 'key' not in 'GroupConfig'`` for the first key the schema lacks anywhere in ``value`` (a
    converted config: OmegaConf keeps a key added with ``+group.key=...`` as an attribute of the group's dataclass),
    else None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [f.name for f in dataclasses.fields(value)]
        extra = sorted(set(vars(value)) - set(names))
        if extra:
            return f"{prefix}{extra[0]}: Key '{extra[0]}' not in '{type(value).__name__}'"
        children = [(f"{prefix}{name}.", getattr(value, name)) for name in names]
    elif isinstance(value, dict):
        children = [(f"{prefix}{key}.", item) for key, item in value.items()]
    elif isinstance(value, list):
        children = [(f"{prefix}{index}.", item) for index, item in enumerate(value)]
    else:
        return None
    return next((found for path, child in children if (found := unknown_key(child, path)) is not None), None)
