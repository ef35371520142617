"""The overhead history across sweeps: one point per arm and sweep, in series by (CPU model, GPUs, condition,
tool) in version then date order, with the steps in each series' per-step overhead (ms). Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Tuple

import pandas as pd

from ddpbench.analysis.changepoint import ALPHA, METHOD, ChangePoints, Step, find_steps
from ddpbench.analysis.figures import config_of
from ddpbench.analysis.pairing import pair_table, str_or_none
from ddpbench.analysis.projection import JOB_HOURS, job_seconds, projected_values
from ddpbench.analysis.stats import PairedSummary, paired_summary
from ddpbench.analysis.versions import imported_version
from ddpbench.formats.condition import base_mode

REGRESSION_STEP, IMPROVEMENT_STEP = "regression", "improvement"
#: (CPU model, GPU names, condition id, tool): the points comparable with each other
Series = Tuple[str, str, str, str]
_NONE = paired_summary([])
#: the distribution whose version every trial records (``environment.traceml_ai``): a TraceML mode's version
TRACEML_PACKAGE = "traceml-ai"


@dataclass(frozen=True)
class HistoryPoint:
    """One arm's overhead against the baseline in one sweep."""

    series: Series
    # the tool version its ranks imported ("unknown" when not recorded), and the date its sweep started (YYYY-MM-DD)
    version: str
    date: str
    sweep_dir: str
    # per-step overhead, ms and % of the baseline's step, and projected onto a job of History.job_hours (% of the job)
    step_ms: PairedSummary
    step_pct: PairedSummary = _NONE
    projected_pct: PairedSummary = _NONE
    # the arm as the sweep named it (e.g. traceml==0.5.0), the version spec it asked for ("" without versions=),
    # and its mode's description and command template (as recorded in its trials' config)
    arm: str = ""
    spec: str = ""
    description: str = ""
    command: str = ""
    # the first point of a new level in its series (a step found just before it)
    step_change: bool = False


@dataclass(frozen=True)
class HistoryChange:
    """A step in one series: between ``before`` (the last point of the old level) and ``after`` (the first of the new)."""

    series: Series
    before: HistoryPoint
    after: HistoryPoint
    # the step on the per-step overhead, ms: levels either side, after − before with its 95 % interval, p-value
    step: Step

    @property
    def kind(self) -> str:
        """``regression`` when the overhead rose, else ``improvement``."""
        return REGRESSION_STEP if self.step.delta > 0 else IMPROVEMENT_STEP


@dataclass(frozen=True)
class History:
    """Every point in series order, the steps found, and how they were found."""

    points: Tuple[HistoryPoint, ...]
    changes: Tuple[HistoryChange, ...]
    # series -> what the change-point method saw (the spread between sweeps it used, the points it tested)
    fits: Dict[Series, ChangePoints] = field(default_factory=dict)
    method: str = METHOD
    alpha: float = ALPHA
    job_hours: float = JOB_HOURS

    def series(self) -> List[Series]:
        """The series in order."""
        return list(dict.fromkeys(p.series for p in self.points))

    def of(self, series: Series) -> List[HistoryPoint]:
        """The points of one series, in order."""
        return [p for p in self.points if p.series == series]


def _first(rows: pd.DataFrame, column: str) -> str:
    values = sorted({str_or_none(v) or "" for v in rows[column]} - {""}) if column in rows else []
    return values[0] if values else ""


def _mode_config(rows: pd.DataFrame) -> Dict[str, Any]:
    modes = (config_of(row).get("mode") for row in rows.to_dict("records"))
    return next((mode for mode in modes if isinstance(mode, dict)), {})


def _version_key(version: str) -> Tuple[Any, ...]:
    try:
        from packaging.version import Version

        return (0, Version(version.split(",")[0].strip()))
    except Exception:  # noqa: BLE001 - an unparsable version sorts after the parsable ones, by text
        return (1, version)


def _points(frame: pd.DataFrame, baseline: str, job_s: float) -> List[HistoryPoint]:
    points: List[HistoryPoint] = []
    for (sweep, cond), rows in frame.groupby(["sweep_dir", "condition_id"], sort=True):
        pairs, _, _ = pair_table(rows, baseline=baseline)
        for arm in sorted({p.mode for p in pairs}):
            chosen = [p for p in pairs if p.mode == arm]
            arm_rows = rows[rows["mode"] == arm]
            mode = _mode_config(arm_rows)
            version = imported_version(rows, arm) or (_first(arm_rows, "env_traceml_ai")
                                                      if mode.get("requires_package") == TRACEML_PACKAGE else "")
            command = mode.get("command")
            projected = projected_values([p.step_overhead_pct for p in chosen], [p.fixed_diff_s for p in chosen], job_s)
            points.append(HistoryPoint(
                (_first(arm_rows, "env_cpu_model"), _first(arm_rows, "env_gpu_names"), str(cond), base_mode(arm)),
                version or "unknown", _first(rows, "started_at")[:10], str(sweep),
                paired_summary([p.step_overhead_ms for p in chosen]),
                paired_summary([p.step_overhead_pct for p in chosen]), paired_summary(projected), arm,
                _first(arm_rows, "arm_spec"), str_or_none(mode.get("description")) or "",
                " ".join(str(c) for c in command) if isinstance(command, list) else str_or_none(command) or ""))
    points.sort(key=lambda p: (p.series, _version_key(p.version), p.date, p.sweep_dir))
    return points


def _se(s: PairedSummary) -> float:
    return s.sd / math.sqrt(s.n) if s.n >= 2 and math.isfinite(s.sd) else math.nan


def history(frame: pd.DataFrame, baseline: str = "native", job_hours: float = JOB_HOURS,
            alpha: float = ALPHA) -> History:
    """The collected sweeps as series of points, with the steps of each series. A point's version is what its ranks
    imported, else a TraceML mode's recorded ``env_traceml_ai``, else ``unknown``."""
    points = _points(frame, baseline, job_seconds(job_hours))
    flagged: List[HistoryPoint] = []
    changes: List[HistoryChange] = []
    fits: Dict[Series, ChangePoints] = {}
    for series in dict.fromkeys(p.series for p in points):
        chosen = [p for p in points if p.series == series]
        fit = find_steps([p.step_ms.mean for p in chosen], [_se(p.step_ms) for p in chosen],
                         [p.step_ms.n for p in chosen], alpha=alpha)
        fits[series] = fit
        starts = {s.index: s for s in fit.steps}
        for i, point in enumerate(chosen):
            flagged.append(replace(point, step_change=i in starts))
            if i in starts:
                before = max(j for j in fit.tested if j < i)
                changes.append(HistoryChange(series, chosen[before], chosen[i], starts[i]))
    return History(tuple(flagged), tuple(changes), fits, METHOD, alpha, job_hours)
