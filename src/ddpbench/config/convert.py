"""The one conversion of a composed config into the schema's dataclasses (:func:`typed`; one trial's, decided and
checked: :func:`typed_trial`; back to plain containers: ``dataclasses.asdict``), and the schema's registration with
Hydra (:func:`register_configs`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ddpbench.config.checks import validate
from ddpbench.config.decided import decide
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
        unknown = unknown_key(node)
        converted = OmegaConf.to_object(node)
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None)
        message = str(getattr(error, "msg", None) or error).splitlines()[0]
        raise ConfigError(f"{key}: {message}" if key else message) from None
    assert isinstance(converted, DdpbenchConfig)
    if unknown is not None:
        raise ConfigError(unknown)
    if converted.version is not None:  # the arm is named by its tool version: traceml==0.4.2
        converted.mode.name = arm_name(converted.mode.name, converted.version)
    return converted



def typed_trial(cfg: Union[DictConfig, DdpbenchConfig]) -> DdpbenchConfig:
    """One trial's config (a composed one: :func:`typed`'s) with what it decides beyond its values (``.decided``),
    every rule types cannot express checked (:func:`~ddpbench.config.checks.validate`): ConfigError, one line naming
    the key. Once per trial config, where it is converted; a sweep's own config (its repeat a range) stays
    :func:`typed`'s."""
    converted = cfg if isinstance(cfg, DdpbenchConfig) else typed(cfg)
    return validate(converted.deciding(decide(converted)))


def unknown_key(node: Any, prefix: str = "") -> Optional[str]:
    """``group.key: Key 'key' not in 'GroupConfig'`` for the first key the schema lacks anywhere in the composed
    ``node`` (``+group.key=...`` adds one Hydra keeps, and the conversion would not refuse), else None. Keys of a
    dict (``workload.metrics``, ``mode.env``, ...) are the user's to name."""
    if not isinstance(node, DictConfig) or node._is_none() or node._is_missing() or node._is_interpolation():
        return None
    kind = OmegaConf.get_type(node)
    if kind is not None and dataclasses.is_dataclass(kind):
        names = {f.name for f in dataclasses.fields(kind)}
        extra = sorted(str(key) for key in node.keys() if key not in names)
        if extra:
            return f"{prefix}{extra[0]}: Key '{extra[0]}' not in '{kind.__name__}'"
    for key, child in node.items_ex(resolve=False):
        found = unknown_key(child, f"{prefix}{key!s}.")
        if found is not None:
            return found
    return None
