"""Result value objects of the paired analysis (frozen dataclasses; see :mod:`ddpbench.analysis.paired`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ddpbench.analysis.stats import PairedSummary
from ddpbench.analysis.switching import SwitchedEstimate
from ddpbench.choices import Role

#: a calibration passes when the recovered cost is within this % of the injected one
CALIBRATION_TOLERANCE_PCT = 10.0


@dataclass(frozen=True)
class PairRecord:
    """One pair's figures: both sides and the per-pair overheads (units in :data:`METRICS`)."""

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
    # added with analysis record v2 (NaN where a side lacks the figure):
    wall_diff_s: float = math.nan
    step_median_overhead_ms: float = math.nan
    step_median_overhead_pct: float = math.nan
    startup_diff_pct: float = math.nan
    teardown_diff_pct: float = math.nan
    # added with analysis record v3: start-up Δ + teardown Δ, s (what one run pays once)
    fixed_diff_s: float = math.nan
    # added with analysis record v4: the mode trial's within-trial per-step cost (switching=blocks), ms; NaN otherwise
    switched_step_overhead_ms: float = math.nan
    # added with analysis record v5: the mode trial's within-trial estimate, % of its off-blocks' step (what
    # repeat=auto's lower bound decides on; switching=blocks, NaN otherwise)
    switched_step_overhead_pct: float = math.nan


#: causes of an excluded pair: pairing could not use it (a side missing, not ok, lacking its wall time, or of
#: another workload), or a ``repeat=auto`` sweep found it disturbed and ran another pair in its place
UNPAIRED, RERUN = "unpaired", "rerun"


@dataclass(frozen=True)
class ExcludedPair:
    """A pair left out of the statistics: ``cause`` (:data:`UNPAIRED` or :data:`RERUN`) and the details in ``reason``."""

    sweep_dir: str
    condition_id: str
    repeat: int
    mode: str
    reason: str
    # added with analysis record v3
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
class Verdict:
    """``within``, ``over`` or ``inconclusive`` against ``budget_pct`` (percent), with the reason; each figure's own
    status (``per_metric``), the figures that decided (``decided_by``, empty when inconclusive) and whether the
    within-trial figure's assumption held where it could be checked (:mod:`ddpbench.analysis.verdict`)."""

    status: str
    budget_pct: float
    reason: str
    per_metric: dict[str, str] = field(default_factory=dict)
    # added with analysis record v5
    decided_by: tuple[str, ...] = ()
    assumption_holds: bool | None = None
    # the within-trial lower bound the verdict weighed: (mean, low, high) % of the step, its interval's level; None
    # when the trials did not switch
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
    """Run-to-run and within-run variability of one mode over the included pairs' trials, percent.

    ``step_time_cv_within_pct``: mean over trials of step_time_ms.stdev / step_time_ms.mean;
    ``step_time_cv_across_pct``: CV across trials of step_time_ms.mean;
    ``throughput_cv_pct``: CV across trials of steps_per_s.
    """

    mode: str
    n_trials: int
    step_time_cv_within_pct: float
    step_time_cv_across_pct: float
    throughput_cv_pct: float


@dataclass(frozen=True)
class CalibrationItem:
    """Injected vs recovered value of one cost; ``within_tolerance`` None when nothing was injected or when the
    loop does not let this figure show the cost (``knowable`` False)."""

    name: str
    unit: str
    injected: float
    recovered: float
    error_pct: float
    within_tolerance: bool | None
    # added with analysis record v7: where the cost was injected (host, device, start-up, teardown)
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
    """Hodges–Lehmann estimate and Wilcoxon signed-rank interval of one metric's per-pair values.

    Units are the metric's. ``achieved_confidence`` is the interval's real coverage (with few pairs
    the requested level is unreachable: [min, max] at 1 − 2/2ⁿ). ``boot_low``/``boot_high``: a seeded
    BCa bootstrap interval of the median difference, computed for the per-step metrics only (NaN
    elsewhere). NaN everywhere when n < 2.
    """

    n: int
    estimate: float
    ci_low: float
    ci_high: float
    achieved_confidence: float
    boot_low: float = math.nan
    boot_high: float = math.nan


@dataclass(frozen=True)
class FigureRow:
    """One figure of both sides and its per-pair difference: a phase, a memory peak, a workload metric.

    ``group`` is ``phase``, ``memory``, ``metric``, ``gpu`` (host step, GPU busy, GPU idle per step) or ``startup``
    (the start-up's parts); ``unit`` the figure's (ms, MB, s, or the metric's own). ``base``/``mode``: one-sample summaries of each side's figure; ``diff``: mode − base per
    pair; ``pct``: 100 · (mode/base − 1) per pair, None when the baseline is near zero
    (``note`` says why) or the figure is unknown on a side.
    """

    group: str
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
    """Achieved model TFLOP/s of one mode's trials (mean over trials), or why it is unknown.

    ``tflops`` per GPU (10¹² FLOP/s); ``fraction_of_peak`` of the GPU's dense peak at ``precision``
    (0.05 = 5 %); None with ``note`` when unknown (CPU, another workload, an unknown GPU).
    """

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
    """One mode against the baseline in one condition, over all its pairs (possibly several sweeps).

    ``metrics`` maps each name in :data:`METRICS` to the summary of its per-pair values;
    ``sides`` maps ``base_wall_s, mode_wall_s, base_steps_per_s, mode_steps_per_s, base_step_ms,
    mode_step_ms, base_startup_s, mode_startup_s`` to a one-sample summary (mean and t interval).
    ``noise_floor_pct`` is the A/A throughput-overhead half-width used for caveats (None if no A/A).
    """

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
    verdict: Verdict
    order_effects: tuple[OrderEffect, ...]
    stability: tuple[Stability, ...]
    excluded: tuple[ExcludedPair, ...]
    host_mismatch: tuple[str, ...]
    calibration: Calibration | None
    noise_floor_pct: float | None
    noise_floor_source: str | None
    pairs: tuple[PairRecord, ...]
    # added with analysis record v2:
    workload: str = "mlp"
    robust: dict[str, RobustInterval] = field(default_factory=dict)
    pct_notes: dict[str, str] = field(default_factory=dict)
    rows: tuple[FigureRow, ...] = ()
    efficiency: tuple[Efficiency, ...] = ()
    flags: tuple[Flag, ...] = ()
    # added with analysis record v4: within-trial switching (switching=blocks), the mode's and the baseline's
    # (the baseline's switch is a no-op: the method's noise floor); None when its trials did not switch
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
    # added with analysis record v2:
    disturbed_trials: tuple[Flag, ...] = ()
    tool_artifacts: tuple[ToolArtifact, ...] = ()
    tool_ranking: tuple[str, ...] = ()
    # added with analysis record v3: the job length the verdict projects onto, hours of training
    job_hours: float = 1.0
