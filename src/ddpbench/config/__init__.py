"""Structured configs: the schema every composed ddpbench config is checked against.

The YAML in ``conf/`` supplies the values; the dataclasses here supply types, defaults and the meaning of each
key, one module per part of the config (:mod:`~ddpbench.config.workload`, :mod:`~ddpbench.config.mode`,
:mod:`~ddpbench.config.cluster`, :mod:`~ddpbench.config.sweep`, and the whole in :mod:`~ddpbench.config.schema`).
The application converts a composed config once (:func:`typed`); :func:`validate` checks the rules types cannot
express (:mod:`~ddpbench.config.checks`).
"""

from ddpbench.config.checks import (can_switch, parse_repeat, switches, switching_seed, validate, validate_switching,
                                    validate_tool)
from ddpbench.config.cluster import ClusterConfig, RayConfig, SlurmConfig
from ddpbench.config.convert import register_configs, to_plain, typed
from ddpbench.config.mode import (ArtifactConfig, ModeConfig, ModeSwitchConfig, PySpyConfig, ToolConfig,
                                  TorchProfilerConfig, WandbConfig)
from ddpbench.config.schema import DdpbenchConfig
from ddpbench.config.sweep import PRECISION_METRICS, PrecisionConfig, ReportConfig, SwitchingConfig, TrialConfig
from ddpbench.config.workload import (ConvnetSizeConfig, DataConfig, FaultConfig, InjectConfig, ModelConfig, StopConfig,
                                      TransformerSizeConfig, WorkloadConfig)

__all__ = [
    "PRECISION_METRICS",
    "ArtifactConfig", "ClusterConfig", "ConvnetSizeConfig", "DataConfig", "DdpbenchConfig", "FaultConfig",
    "InjectConfig", "ModeConfig", "ModeSwitchConfig", "ModelConfig", "PrecisionConfig", "PySpyConfig", "RayConfig",
    "ReportConfig", "SlurmConfig", "StopConfig", "SwitchingConfig", "ToolConfig", "TorchProfilerConfig",
    "TransformerSizeConfig", "TrialConfig", "WandbConfig", "WorkloadConfig",
    "can_switch", "parse_repeat", "register_configs", "switches", "switching_seed", "to_plain", "typed", "validate", "validate_switching",
    "validate_tool",
]
