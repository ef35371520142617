"""Structured configs: the schema every composed ddpbench config is checked against.

The YAML in ``conf/`` supplies the values; the dataclasses here supply types, defaults and the meaning of each key,
one module per part of the config and the whole in :mod:`~ddpbench.config.schema`. The application converts a
composed config once (:func:`typed`); :func:`validate` checks the rules types cannot express.
"""

from ddpbench.config.checks import parse_repeat, switches, switching_seed, validate
from ddpbench.config.cluster import ClusterConfig
from ddpbench.config.convert import register_configs, to_plain, typed
from ddpbench.config.mode import ModeConfig, ModeSwitchConfig
from ddpbench.config.schema import DdpbenchConfig
from ddpbench.config.sweep import PRECISION_METRICS, PrecisionConfig
from ddpbench.config.workload import WorkloadConfig

__all__ = ["PRECISION_METRICS", "ClusterConfig", "DdpbenchConfig", "ModeConfig", "ModeSwitchConfig", "PrecisionConfig",
           "WorkloadConfig", "parse_repeat", "register_configs", "switches", "switching_seed", "to_plain", "typed",
           "validate"]
