"""How trials are run, repeated and judged: a trial's limits (trial.*), within-trial switching (switching.*),
when ``repeat=auto`` stops adding pairs (precision.*), and the report's verdict (report.*)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ddpbench.choices import Disturbed, Spending, SwitchingKind


@dataclass
class TrialConfig:
    """Limits and outputs of one trial."""

    # watchdog limit in seconds; null = expected duration * timeout_factor + timeout_margin_s
    timeout_s: Optional[float] = None
    # expected seconds per timed step, used for the automatic timeout of a steps stop
    expected_step_s: float = 0.5
    # automatic timeout: expected training time times this
    timeout_factor: float = 3.0
    # automatic timeout: plus this many seconds (start-up, TraceML's finalisation)
    timeout_margin_s: float = 120.0
    # process-group timeout inside the workload, s: a hung collective becomes an error
    collective_timeout_s: float = 60.0
    # rank 0 prints a progress line every N timed steps to its log, shown live on a terminal (0 = silent)
    log_every: int = 50
    # keep the per-step times in the rank records
    save_step_times: bool = True
    # skip a trial whose trial.json is ok for the same resolved config
    resume: bool = True


@dataclass
class SwitchingConfig:
    """Within-trial switching (conf/switching/): blocks of steps with the tool's per-step work off and on, ABBA order."""

    kind: SwitchingKind = SwitchingKind.none
    # timed steps per block (docs/accuracy.md: how the default was chosen)
    block_steps: int = 10
    # steps at the start of each block left out of its statistics (recorded): what a switch leaves behind
    washout_steps: int = 2
    # seed of the first block's side; null = seed * 1000 + repeat (a different draw per repeat, recorded)
    seed: Optional[int] = None


#: paired metrics repeat=auto may decide on (per-pair values of the analysis; units: % or ms)
PRECISION_METRICS = ("projected_overhead_pct", "step_overhead_pct", "step_overhead_ms", "step_median_overhead_pct",
                     "step_median_overhead_ms", "throughput_overhead_pct", "wall_overhead_pct",
                     "switched_step_overhead_ms")


@dataclass
class PrecisionConfig:
    """When ``repeat=auto`` stops adding pairs (ddpbench.analysis.sequential; docs/analysis.md)."""

    # the paired metric the rule decides on (one of PRECISION_METRICS; % metrics against budget_pct, ms metrics
    # against budget_ms); projected_overhead_pct is what the report's verdict is on
    metric: str = "projected_overhead_pct"
    # stop once the interval's half-width is at most this (the metric's unit); null = only a verdict or a limit
    halfwidth_pct: Optional[float] = 1.0
    # never stop before this many pairs per condition (at least 2: an interval needs two)
    min_pairs: int = 3
    # never run more than this many pairs per condition
    max_pairs: int = 12
    # stop adding pairs once the sweep has run this long, minutes
    max_minutes: float = 60.0
    spending: Spending = Spending.pocock
    # budget for a ms metric, ms per step (null = a ms metric needs it set)
    budget_ms: Optional[float] = None
    # a rerun pair still uses up max_pairs and max_minutes
    disturbed: Disturbed = Disturbed.rerun


@dataclass
class ReportConfig:
    """How the report turns the trials' figures into a verdict (ddpbench.analysis.projection)."""

    # length of the user's job, hours of training: the verdict is on (per-step cost over the job + fixed cost) / job
    job_hours: float = 1.0
