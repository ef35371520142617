"""Structured configs: the types, defaults and meaning of every key (the values: YAML in ``conf/``), one module per
part of the config, the whole in :mod:`~ddpbench.config.schema`; converted once (:func:`typed`); a trial's also
decided (:mod:`~ddpbench.config.decided`) and checked for the rules types cannot express (:func:`typed_trial`).
"""

from ddpbench.config.checks import parse_repeat, switches, switching_seed, validate
from ddpbench.config.cluster import ClusterConfig
from ddpbench.config.convert import register_configs, typed, typed_trial
from ddpbench.config.decided import Decided, ScriptWorkload
from ddpbench.config.mode import ModeConfig, ModeSwitchConfig
from ddpbench.config.schema import DdpbenchConfig
from ddpbench.config.sweep import PRECISION_METRICS, PrecisionConfig
from ddpbench.config.workload import WorkloadConfig

__all__ = ["PRECISION_METRICS", "ClusterConfig", "DdpbenchConfig", "Decided", "ModeConfig", "ModeSwitchConfig",
           "PrecisionConfig", "ScriptWorkload", "WorkloadConfig", "parse_repeat", "register_configs", "switches",
           "switching_seed", "typed", "typed_trial", "validate"]
