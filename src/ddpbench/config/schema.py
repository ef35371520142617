"""The whole composed config of one trial: one field per config group (the groups' dataclasses live beside it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from omegaconf import MISSING

from ddpbench.choices import Timing
from ddpbench.config.cluster import ClusterConfig
from ddpbench.config.mode import ModeConfig, ToolConfig
from ddpbench.config.sweep import PrecisionConfig, ReportConfig, SwitchingConfig, TrialConfig
from ddpbench.config.workload import DataConfig, FaultConfig, InjectConfig, ModelConfig, StopConfig, WorkloadConfig

if TYPE_CHECKING:  # pragma: no cover
    from ddpbench.config.decided import Decided


@dataclass
class DdpbenchConfig:
    """The whole composed config of one trial; :attr:`decided`: what it decides beyond its values."""

    model: ModelConfig = field(default_factory=ModelConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    data: DataConfig = field(default_factory=DataConfig)
    timing: Timing = Timing.step
    stop: StopConfig = field(default_factory=StopConfig)
    mode: ModeConfig = field(default_factory=ModeConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    fault: FaultConfig = field(default_factory=FaultConfig)
    inject: InjectConfig = field(default_factory=InjectConfig)
    trial: TrialConfig = field(default_factory=TrialConfig)
    switching: SwitchingConfig = field(default_factory=SwitchingConfig)
    # settings of the shipped tools' modes
    tool: ToolConfig = field(default_factory=ToolConfig)
    # repeat label; a sweep gives A-B, the sweeper expands it. Not typed int on purpose.
    repeat: Any = 1
    # position of this trial within its pair (set by the sweeper)
    pair_position: int = 0
    # sweep folder name under outputs/multirun; reuse it to resume a sweep
    sweep_name: str = MISSING
    # random seed of the workload's data and weights
    seed: int = 42
    # baseline mode for the report
    baseline: str = "native"
    # overhead budget for the report's verdicts, %
    budget_pct: float = 2.0
    # repeat=auto: when to stop adding pairs
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    # the report's verdict
    report: ReportConfig = field(default_factory=ReportConfig)
    # tool versions compared in one sweep: mode -> version specs (a PyPI version or requirement, a wheel file,
    # a source tree, path@ref of a git repository); each spec is an arm of its own (docs/versions.md)
    versions: Dict[str, List[str]] = field(default_factory=dict)
    # the version spec this trial's arm runs (the sweeper sets it from `versions`; null = the installed tool)
    version: Optional[str] = None
    # a version is a regression when its per-step cost exceeds the previous version's by more than this, %
    regression_pct: float = 1.0

    def __post_init__(self) -> None:
        # not a field (no key of the config, nothing of its record or hash): set where a trial's config is converted
        self._decided: Optional[Decided] = None

    @property
    def decided(self) -> Decided:
        """What this trial's config decides beyond its values (:mod:`ddpbench.config.decided`), worked out once where
        it was converted (:func:`ddpbench.config.typed_trial`)."""
        if self._decided is None:
            raise RuntimeError("a trial's config is converted by ddpbench.config.typed_trial, which decides it")
        return self._decided

    def deciding(self, decided: Decided) -> DdpbenchConfig:
        """This config with ``decided`` (the conversion's, or one a copy of a converted config keeps)."""
        self._decided = decided
        return self
