"""Result value objects of the paired analysis (frozen dataclasses; see :mod:`ddpbench.analysis.paired`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ddpbench.analysis.stats import PairedSummary
from ddpbench.analysis.switching import SwitchedEstimate
from ddpbench.choices import Choice, Role, Verdict

#: a calibration passes when the recovered cost is within this % of the injected one
CALIBRATION_TOLERANCE_PCT = 10.0


@dataclass(frozen=True)
class PairRecord:
    """One pair's figures: both sides and the per-pair overheads (units in ``paired.METRIC_UNITS``; NaN: unknown)."""

    sweep_dir: str
    condition_id: str
    repeat: int
    mode: str
    base_wall_s: float
    mode_wall_s: float
    base_steps_per_s: float
    mode_steps_per_s: float
    base_step_ms: float
    mode_step_ms: float
    mode_position: int
    base_position: int
    hosts_differ: bool
    wall_overhead_pct: float
    throughput_overhead_pct: float
    step_overhead_ms: float
    step_overhead_pct: float
    startup_diff_s: float
    train_diff_s: float
    teardown_diff_s: float
    wall_diff_s: float = math.nan
    step_median_overhead_ms: float = math.nan
    step_median_overhead_pct: float = math.nan
    startup_diff_pct: float = math.nan
    teardown_diff_pct: float = math.nan
    fixed_diff_s: float = math.nan
    # the mode trial's within-trial per-step cost (switching=blocks; NaN otherwise), ms and % of its off-blocks' step
    switched_step_overhead_ms: float = math.nan
    switched_step_overhead_pct: float = math.nan


#: causes of an excluded pair: pairing could not use it, or a ``repeat=auto`` sweep re-ran it (disturbed)
UNPAIRED, RERUN = "unpaired", "rerun"


@dataclass(frozen=True)
class ExcludedPair:
    """A pair left out of the statistics: ``cause`` (:data:`UNPAIRED` or :data:`RERUN`) and the details in ``reason``."""

    sweep_dir: str
    condition_id: str
    repeat: int
    mode: str
    reason: str
    cause: str = UNPAIRED


@dataclass(frozen=True)
class FailedTrial:
    """A trial whose status is not ``ok``."""

    source_path: str
    sweep_dir: str
    condition_id: str
    mode: str
    repeat: int
    status: str
    exit_code: int | None
    error: str | None


@dataclass(frozen=True)
class BudgetVerdict:
    """The verdict against ``budget_pct`` (percent), with the reason and each figure's own verdict
    (:mod:`ddpbench.analysis.verdict`)."""

    status: Verdict
    budget_pct: float
    reason: str
    per_metric: dict[str, Verdict] = field(default_factory=dict)
    # the figures that decided (empty when inconclusive); whether the within-trial figure's assumption held
    decided_by: tuple[str, ...] = ()
    assumption_holds: bool | None = None
    # the within-trial lower bound weighed: (mean, low, high) % of the step and its level; None without switching
    lower_bound_pct: tuple[float, float, float] | None = None
    lower_bound_confidence: float | None = None


@dataclass(frozen=True)
class OrderEffect:
    """Mean of ``metric`` over pairs where the compared mode ran first vs second, and their difference."""

    metric: str
    n_mode_first: int
    mean_mode_first: float
    n_mode_second: int
    mean_mode_second: float

    @property
    def difference(self) -> float:
        """``mean_mode_first − mean_mode_second`` (units of the metric)."""
        return self.mean_mode_first - self.mean_mode_second


@dataclass(frozen=True)
class Stability:
    """Within-trial (mean of each trial's step-time CV) and across-trial (CV of the trials' mean step time and
    throughput) variability of one mode over the included pairs' trials, percent."""

    mode: str
    n_trials: int
    step_time_cv_within_pct: float
    step_time_cv_across_pct: float
    throughput_cv_pct: float


@dataclass(frozen=True)
class CalibrationItem:
    """Injected vs recovered value of one cost; ``within_tolerance`` None when not injected or not ``knowable``."""

    name: str
    unit: str
    injected: float
    recovered: float
    error_pct: float
    within_tolerance: bool | None
    # where the cost was injected (host, device, start-up, teardown)
    side: str = "host"
    # whether this loop lets this figure show the cost (None: not assessed)
    knowable: bool | None = None
    # why (one phrase), or "not injected"
    where: str = ""


@dataclass(frozen=True)
class Calibration:
    """Recovery of the injected costs (``config.inject``) by the paired differences."""

    items: tuple[CalibrationItem, ...]
    tolerance_pct: float = CALIBRATION_TOLERANCE_PCT

    @property
    def all_within(self) -> bool | None:
        """True when every injected cost was recovered within tolerance; None when nothing was injected."""
        checked = [i.within_tolerance for i in self.items if i.within_tolerance is not None]
        return all(checked) if checked else None


@dataclass(frozen=True)
class RobustInterval:
    """Hodges–Lehmann estimate and Wilcoxon signed-rank interval (at its ``achieved_confidence``) of one metric's
    per-pair values, in its unit; ``boot_*``: a BCa bootstrap interval of the median (per-step metrics only)."""

    n: int
    estimate: float
    ci_low: float
    ci_high: float
    achieved_confidence: float
    boot_low: float = math.nan
    boot_high: float = math.nan


class FigureGroup(Choice):
    """The table of a condition a :class:`FigureRow` belongs to."""

    phase = "phase"  # per-phase time (timing=phase), ms per step
    gpu = "gpu"  # the step on the GPU's clock, ms per step
    startup = "startup"  # start-up by part, s per trial
    memory = "memory"  # peak memory, MB
    metric = "metric"  # figures read from the workload's output, in their own units


@dataclass(frozen=True)
class FigureRow:
    """One figure of both sides in ``unit``, with the per-pair difference and percentage (None, with ``note``, when
    the baseline is near zero or a side lacks it)."""

    group: FigureGroup
    name: str
    unit: str
    base: PairedSummary
    mode: PairedSummary
    diff: PairedSummary
    pct: PairedSummary | None
    robust: RobustInterval
    note: str | None = None


@dataclass(frozen=True)
class Flag:
    """A trial or pair to read with care: ``kind`` is ``disturbed trial``, ``disturbed pair`` or ``outlier pair``."""

    kind: str
    sweep_dir: str
    condition_id: str
    mode: str
    repeat: int
    reason: str


@dataclass(frozen=True)
class Efficiency:
    """Mean achieved model TFLOP/s per GPU of one mode's trials and its fraction of the dense peak (0.05 = 5 %), or
    None with the reason in ``note``."""

    mode: str
    n_trials: int
    flops_per_step: int | None
    tflops: float | None
    fraction_of_peak: float | None
    gpu: str | None
    precision: str | None
    note: str | None


@dataclass(frozen=True)
class ToolArtifact:
    """What one trial's tool left behind (trial record v2 ``tool``)."""

    condition_id: str
    mode: str
    repeat: int
    name: str | None
    usable: bool | None
    bytes: int | None
    problem: str | None


@dataclass(frozen=True)
class Comparison:
    """One mode against the baseline in one condition, over all its pairs (possibly several sweeps): each metric's
    summary, each side figure's one-sample summary, and the A/A noise floor (None without an A/A)."""

    condition_id: str
    condition: dict[str, Any]
    mode: str
    baseline: str
    role: Role
    stop_kind: str | None
    sweep_dirs: tuple[str, ...]
    n_pairs: int
    metrics: dict[str, PairedSummary]
    sides: dict[str, PairedSummary]
    verdict: BudgetVerdict
    order_effects: tuple[OrderEffect, ...]
    stability: tuple[Stability, ...]
    excluded: tuple[ExcludedPair, ...]
    host_mismatch: tuple[str, ...]
    calibration: Calibration | None
    noise_floor_pct: float | None
    noise_floor_source: str | None
    pairs: tuple[PairRecord, ...]
    workload: str = "mlp"
    robust: dict[str, RobustInterval] = field(default_factory=dict)
    pct_notes: dict[str, str] = field(default_factory=dict)
    rows: tuple[FigureRow, ...] = ()
    efficiency: tuple[Efficiency, ...] = ()
    flags: tuple[Flag, ...] = ()
    # within-trial switching, the mode's and the baseline's (a no-op switch: the method's noise floor); None without
    switched: SwitchedEstimate | None = None
    switched_base: SwitchedEstimate | None = None

    @property
    def n_excluded(self) -> int:
        """Number of excluded pairs."""
        return len(self.excluded)

    @property
    def label(self) -> str:
        """``<mode> vs <baseline> [<condition_id>]``."""
        return f"{self.mode} vs {self.baseline} [{self.condition_id}]"


@dataclass(frozen=True)
class Analysis:
    """Everything the report needs: comparisons, failures, and the settings used."""

    baseline: str
    budget_pct: float
    confidence: float
    comparisons: tuple[Comparison, ...]
    failed_trials: tuple[FailedTrial, ...]
    n_trials: int
    n_ok: int
    noise_floors: dict[str, float]
    methods: dict[str, str]
    disturbed_trials: tuple[Flag, ...] = ()
    tool_artifacts: tuple[ToolArtifact, ...] = ()
    tool_ranking: tuple[str, ...] = ()
    # the job length the verdict projects onto, hours of training
    job_hours: float = 1.0


def jsonable(value: Any) -> Any:
    """``value`` with its dataclasses (and their properties) as dicts and non-finite floats as None, for JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for prop in ("half_width", "difference", "all_within", "n_excluded", "label"):
            if isinstance(getattr(type(value), prop, None), property):
                out[prop] = jsonable(getattr(value, prop))
        return out
    if hasattr(value, "item"):
        return jsonable(value.item())
    return value
