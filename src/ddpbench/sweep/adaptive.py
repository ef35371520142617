"""``repeat=auto``: keep adding pairs per condition until the chosen metric's verdict is known (docs/sequential.md).

The driver expands ``repeat=auto`` to ``repeat=1..precision.max_pairs`` (:func:`expand_auto`) and, after every
complete pair, asks :class:`AdaptiveStop` whether that condition is decided; its remaining pairs are then skipped.
Decisions read the trial records in the sweep dir and are written to ``stopping.json``.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ddpbench.choices import Disturbed
from ddpbench.config import PRECISION_METRICS, PrecisionConfig
from ddpbench.errors import ConfigError
from ddpbench.formats.condition import is_condition_override, parse_overrides
from ddpbench.formats.trial_record import TRIAL_FILE

#: seconds a driver waits for a pair's trial records to appear (a peer node's driver waits for node 0's)
RECORD_WAIT_S = 120.0
#: the within-trial per-step cost (ms), known only when the trials switch (switching=blocks)
SWITCHED_METRIC = "switched_step_overhead_ms"


def expand_auto(arguments: Sequence[str], max_pairs: int) -> Tuple[List[str], bool]:
    """``arguments`` with ``repeat=auto`` replaced by ``repeat=range(1,max_pairs+1)``; whether it was there."""
    auto = [argument.replace(" ", "") == "repeat=auto" for argument in arguments]
    expanded = [f"repeat=range(1,{int(max_pairs) + 1})" if is_auto else argument
                for argument, is_auto in zip(arguments, auto)]
    return expanded, any(auto)


def check_precision(precision: PrecisionConfig, modes: Sequence[str], shared_dir: bool, switching: bool = False) -> None:
    """Raise ConfigError (one line) when ``repeat=auto`` cannot run with these settings (``switching``: every trial
    runs with ``switching=blocks``)."""
    from ddpbench.analysis.sequential import check_rule

    if len(set(modes)) < 2:
        raise ConfigError(f"repeat=auto compares modes: give at least two (mode=native,traceml), got {sorted(set(modes))}")
    if precision.metric not in PRECISION_METRICS:
        raise ConfigError(f"precision.metric={precision.metric!r}: must be one of {', '.join(PRECISION_METRICS)}")
    if precision.metric == SWITCHED_METRIC and not switching:
        raise ConfigError(f"precision.metric={SWITCHED_METRIC}: the within-trial figure needs switching=blocks")
    if precision.metric.endswith("_ms") and precision.budget_ms is None:
        raise ConfigError(f"precision.metric={precision.metric}: a ms metric needs precision.budget_ms (ms per step)")
    if not shared_dir:
        raise ConfigError("repeat=auto needs every node to read the trial records: cluster.shared_dir=true")
    try:
        check_rule(0.95, precision.halfwidth_pct, precision.min_pairs, precision.max_pairs, precision.max_minutes,
                   precision.spending)
    except ValueError as error:
        raise ConfigError(f"precision: {error}") from None


def condition_key(overrides: Sequence[str]) -> Tuple[str, ...]:
    """The overrides a job shares with every job of its condition (sorted)."""
    return tuple(sorted(o for o in overrides if is_condition_override(o)))


def repeat_of(overrides: Sequence[str]) -> int:
    """The job's repeat label."""
    return next(int(o.get_value_element_as_str()) for o in parse_overrides(overrides) if o.key_or_group == "repeat")


@dataclass
class ConditionState:
    """What the driver knows of one condition: its finished pairs and, once decided, why it stopped."""

    condition: Tuple[str, ...]
    # pairs finished, counted or not
    pairs: int = 0
    reason: Optional[str] = None
    comparisons: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    # the trials' condition_id (None before the first record is read)
    condition_id: Optional[str] = None
    # disturbed pairs left out of the decision: {"repeat": int, "why": str}
    excluded: List[Dict[str, Any]] = field(default_factory=list)
    # repeats whose pairs the last decision used
    counted: List[int] = field(default_factory=list)


class AdaptiveStop:
    """Decides, after each complete pair, whether a condition needs more pairs."""

    def __init__(self, sweep_dir: Path, precision: PrecisionConfig, baseline: str, budget_pct: float,
                 job_hours: float = 1.0) -> None:
        from ddpbench.analysis.projection import job_seconds

        self.sweep_dir = sweep_dir
        self.job_s = job_seconds(job_hours)
        self.precision = precision
        self.budget = float(precision.budget_ms or 0.0) if precision.metric.endswith("_ms") else budget_pct
        self.baseline = baseline
        self.started = time.monotonic()
        self.conditions: Dict[Tuple[str, ...], ConditionState] = {}

    def is_stopped(self, overrides: Sequence[str]) -> bool:
        """Whether the job's condition is already decided (its remaining pairs are skipped)."""
        state = self.conditions.get(condition_key(overrides))
        return state is not None and state.reason is not None

    def after_pair(self, overrides: Sequence[str], job_dirs: Sequence[str]) -> ConditionState:
        """Record a finished pair (its jobs' dirs) of the job's condition and decide; writes stopping.json."""
        from ddpbench.analysis.pairing import pair_table
        from ddpbench.analysis.projection import pair_value
        from ddpbench.analysis.rerun import disturbed_repeats
        from ddpbench.analysis.sequential import StopReason, decide_with_lower_bound
        from ddpbench.collect.collector import collect_trials

        p = self.precision
        key = condition_key(overrides)
        state = self.conditions.setdefault(key, ConditionState(key))
        state.pairs += 1
        deadline = time.monotonic() + RECORD_WAIT_S  # a peer node's driver finishes before node 0 writes the records
        while time.monotonic() < deadline and not all((Path(d) / TRIAL_FILE).exists() for d in job_dirs):
            time.sleep(0.2)
        frame = collect_trials([self.sweep_dir]).frame
        condition_ids = {str(c) for c in frame[frame["job_dir"].isin([str(Path(d).resolve()) for d in job_dirs])]
                         ["condition_id"]} if len(frame) and "job_dir" in frame else set()
        state.condition_id = state.condition_id or (min(condition_ids) if condition_ids else None)
        pairs, _, sides = pair_table(frame, baseline=self.baseline) if len(frame) else ([], [], {})
        pairs = [p for p in sorted(pairs, key=lambda p: p.repeat) if p.condition_id in condition_ids]
        disturbed = disturbed_repeats(pairs, sides, self.baseline) if p.disturbed == Disturbed.rerun else {}
        state.excluded = [{"repeat": repeat, "why": why} for repeat, why in sorted(disturbed.items())]
        by_mode: Dict[str, List[float]] = {}
        lower_by_mode: Dict[str, List[float]] = {}
        counted = set()
        for pair in pairs:
            value = pair_value(pair, p.metric, self.job_s)
            if pair.repeat not in disturbed and math.isfinite(value):
                by_mode.setdefault(pair.mode, []).append(value)
                counted.add(pair.repeat)
                if p.metric.endswith("_pct") and math.isfinite(pair.switched_step_overhead_pct):
                    lower_by_mode.setdefault(pair.mode, []).append(pair.switched_step_overhead_pct)
        state.counted = sorted(counted)
        elapsed = (time.monotonic() - self.started) / 60.0
        decisions = {mode: decide_with_lower_bound(values, lower_by_mode.get(mode, []), self.budget, 0.95,
                                                   p.halfwidth_pct, p.min_pairs, p.max_pairs, elapsed,
                                                   p.max_minutes, p.spending)
                     for mode, values in sorted(by_mode.items())}
        state.comparisons = {mode: _decision_dict(d) for mode, d in decisions.items()}
        if decisions and all(d.stop for d in decisions.values()):
            state.reason = ", ".join(sorted({str(d.reason) for d in decisions.values()}))
        elif state.pairs >= p.max_pairs:
            state.reason = StopReason.max_pairs
        elif elapsed >= p.max_minutes and state.pairs >= p.min_pairs:
            state.reason = StopReason.max_minutes
        self.write()
        return state

    def write(self) -> None:
        """``stopping.json`` with every condition's state so far."""
        from ddpbench.formats.stopping_record import build_stopping_record, write_stopping_record

        p = self.precision
        rule = {"metric": p.metric, "budget": self.budget, "confidence": 0.95, "halfwidth": p.halfwidth_pct,
                "min_pairs": p.min_pairs, "max_pairs": p.max_pairs, "max_minutes": p.max_minutes,
                "spending": p.spending, "baseline": self.baseline, "disturbed": p.disturbed,
                "source": "Lan & DeMets (1983) alpha spending, exact repeated t boundaries (docs/sequential.md)"}
        conditions = [{"condition": list(s.condition), "condition_id": s.condition_id, "pairs": s.pairs,
                       "excluded": s.excluded, "counted": s.counted, "reason": s.reason or "running",
                       "comparisons": s.comparisons} for s in self.conditions.values()]
        write_stopping_record(self.sweep_dir, build_stopping_record(rule, conditions))


def _decision_dict(decision: Any) -> Dict[str, Any]:
    data = asdict(decision)
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}


def pair_groups(jobs: Sequence[Sequence[str]]) -> Mapping[Tuple[Tuple[str, ...], int], int]:
    """How many jobs each (condition, repeat) pair has: a pair is complete when that many have finished."""
    return Counter((condition_key(overrides), repeat_of(overrides)) for overrides in jobs)
