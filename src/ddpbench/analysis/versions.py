"""Versions compared: each tool version against the previous one in the sweep's list, paired within the repeat.

Pure functions of the collected table (ddpbench.collect). A sweep with ``versions={mode: [v1, v2, ...]}``
runs every version as an arm of its own in the same Williams-ordered repeat block, so version k and
version k-1 of one repeat are a pair just as each is a pair with the baseline: per-step Δ ms (and %),
start-up Δ s, teardown Δ s and peak-memory Δ MB, each with its paired t interval. The verdict is on the
per-step Δ % against ``regression_pct``: its interval wholly above is a ``regression``, wholly at or below
is ``no regression``, else ``inconclusive`` (also with fewer than two pairs).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from ddpbench.analysis.pairing import pair_table
from ddpbench.analysis.stats import PairedSummary, paired_summary
from ddpbench.formats.condition import arm_name

REGRESSION, NO_REGRESSION, INCONCLUSIVE = "regression", "no regression", "inconclusive"
#: per-version-step metrics: key -> unit
METRICS = {"step_ms": "ms", "step_pct": "%", "startup_s": "s", "teardown_s": "s", "memory_mb": "MB"}


@dataclass(frozen=True)
class VersionStep:
    """One version against the previous one in the list, in one condition."""

    condition_id: str
    # the mode both run (e.g. traceml) and the two arms (e.g. traceml==0.4.2, traceml==0.5.0)
    mode: str
    previous: str
    current: str
    # the versions the ranks imported ("" when unknown)
    previous_version: str
    current_version: str
    # METRICS key -> paired summary of current - previous
    metrics: Dict[str, PairedSummary]
    verdict: str
    # trials of these arms whose tool summary had a format this ddpbench does not know
    unknown_formats: Tuple[str, ...] = ()

    @property
    def n_pairs(self) -> int:
        """Pairs behind the per-step figure."""
        return self.metrics["step_ms"].n


def regression_verdict(step_pct: PairedSummary, regression_pct: float) -> str:
    """``regression`` / ``no regression`` / ``inconclusive`` for a per-step Δ % interval against the threshold."""
    if step_pct.n < 2 or not (math.isfinite(step_pct.ci_low) and math.isfinite(step_pct.ci_high)):
        return INCONCLUSIVE
    if step_pct.ci_low > regression_pct:
        return REGRESSION
    if step_pct.ci_high <= regression_pct:
        return NO_REGRESSION
    return INCONCLUSIVE


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def version_lists(frame: pd.DataFrame) -> Dict[str, List[str]]:
    """mode -> its arms in the order the sweep's ``versions=`` lists them (from the trials' configs)."""
    out: Dict[str, List[str]] = {}
    if "config_json" not in frame:
        return out
    for text in frame["config_json"].dropna().unique():
        try:
            versions = json.loads(text).get("versions") or {}
        except (ValueError, AttributeError):
            continue
        for mode, specs in versions.items():
            arms = [arm_name(str(mode), str(spec)) for spec in specs]
            out.setdefault(str(mode), [])
            out[str(mode)] += [a for a in arms if a not in out[str(mode)]]
    return out


def _imported(rows: pd.DataFrame, arm: str) -> str:
    column = "arm_version" if "arm_version" in rows else None
    values = sorted({_text(v) for v in rows.loc[rows["mode"] == arm, column]} - {""}) if column else []
    return ", ".join(values)


def _unknown(rows: pd.DataFrame, arms: Sequence[str]) -> Tuple[str, ...]:
    if "tool_format" not in rows:
        return ()
    hit = rows[(rows["mode"].isin(list(arms))) & (rows["tool_format"] == "unknown")]
    return tuple(sorted({_text(p) for p in hit.get("tool_problem", pd.Series(dtype=str))} - {""}))


def unknown_formats(frame: pd.DataFrame) -> List[str]:
    """One line per arm whose tool summary had a format this ddpbench does not read (its trials stay ok)."""
    if "tool_format" not in frame:
        return []
    hit = frame[frame["tool_format"] == "unknown"]
    lines = []
    for (mode, problem), rows in hit.groupby(["mode", "tool_problem"], sort=True):
        lines.append(f"{mode}: {problem} in {len(rows)} trial(s); ddpbench's own figures are kept, the tool's "
                     "summary figures are not read")
    return lines


def compare_versions(frame: pd.DataFrame, regression_pct: float = 1.0) -> List[VersionStep]:
    """Every version against the previous one in its list, per condition (empty without ``versions=``)."""
    steps: List[VersionStep] = []
    for mode, arms in sorted(version_lists(frame).items()):
        for cond, rows in frame.groupby("condition_id", sort=True):
            for previous, current in zip(arms, arms[1:]):
                both = rows[rows["mode"].isin([previous, current])]
                if not {previous, current} <= set(both["mode"]):
                    continue
                pairs, _, sides = pair_table(both, baseline=previous)
                memory = []
                for base, other in sides.values():
                    b, x = _num(base.get("peak_memory_bytes")), _num(other.get("peak_memory_bytes"))
                    memory.append((x - b) / 1e6 if b is not None and x is not None else math.nan)
                metrics = {
                    "step_ms": paired_summary([p.step_overhead_ms for p in pairs]),
                    "step_pct": paired_summary([p.step_overhead_pct for p in pairs]),
                    "startup_s": paired_summary([p.startup_diff_s for p in pairs]),
                    "teardown_s": paired_summary([p.teardown_diff_s for p in pairs]),
                    "memory_mb": paired_summary(memory),
                }
                steps.append(VersionStep(str(cond), mode, previous, current, _imported(rows, previous),
                                         _imported(rows, current), metrics,
                                         regression_verdict(metrics["step_pct"], regression_pct),
                                         _unknown(rows, [previous, current])))
    return steps


def _num(value: Any) -> Optional[float]:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def regression_exit_code(steps: Sequence[VersionStep]) -> int:
    """``--fail-on-regression``: 1 when a version regressed, else 3 when one is inconclusive, else 0."""
    verdicts = {s.verdict for s in steps}
    return 1 if REGRESSION in verdicts else 3 if INCONCLUSIVE in verdicts else 0


# --- history across sweeps ---


@dataclass(frozen=True)
class HistoryPoint:
    """One tool version's per-step overhead against the baseline in one sweep."""

    # hardware and condition the point is comparable within: (cpu model, gpu names, condition id, mode)
    series: Tuple[str, str, str, str]
    version: str
    date: str
    sweep_dir: str
    # per-step overhead against the baseline, ms (paired summary over the sweep's repeats)
    step_ms: PairedSummary
    # the previous point's interval does not overlap this one's
    step_change: bool = False


def _version_key(version: str) -> Tuple[Any, ...]:
    try:
        from packaging.version import Version

        return (0, Version(version.split(",")[0].strip()))
    except Exception:  # noqa: BLE001 - an unparsable version sorts after the parsable ones, by text
        return (1, version)


def history(frame: pd.DataFrame, baseline: str = "native") -> List[HistoryPoint]:
    """Each sweep's tool versions lined up by hardware and condition, sorted by version then date; step changes flagged.

    A point's version is what its ranks imported (``arm_version``, else the recorded ``env_traceml_ai``).
    """
    points: List[HistoryPoint] = []
    for (sweep, cond), rows in frame.groupby(["sweep_dir", "condition_id"], sort=True):
        pairs, _, sides = pair_table(rows, baseline=baseline)
        for mode in sorted({p.mode for p in pairs}):
            chosen = [p for p in pairs if p.mode == mode]
            arm_rows = rows[rows["mode"] == mode]
            version = _imported(rows, mode) or ", ".join(
                sorted({_text(v) for v in arm_rows.get("env_traceml_ai", pd.Series(dtype=str))} - {""}))
            hardware = (_first(arm_rows, "env_cpu_model"), _first(arm_rows, "env_gpu_names"))
            points.append(HistoryPoint((hardware[0], hardware[1], str(cond), mode.split("==")[0].split("@")[0]),
                                       version or "unknown", _first(rows, "started_at")[:10], str(sweep),
                                       paired_summary([p.step_overhead_ms for p in chosen])))
    points.sort(key=lambda p: (p.series, _version_key(p.version), p.date))
    flagged: List[HistoryPoint] = []
    for point in points:
        before = flagged[-1] if flagged and flagged[-1].series == point.series else None
        change = before is not None and before.version != point.version and not _overlap(before.step_ms, point.step_ms)
        flagged.append(HistoryPoint(point.series, point.version, point.date, point.sweep_dir, point.step_ms, change))
    return flagged


def _first(rows: pd.DataFrame, column: str) -> str:
    if column not in rows:
        return ""
    values = sorted({_text(v) for v in rows[column]} - {""})
    return values[0] if values else ""


def _overlap(a: PairedSummary, b: PairedSummary) -> bool:
    """Whether two intervals overlap (no interval, fewer than two pairs: counted as overlapping)."""
    if not all(math.isfinite(v) for v in (a.ci_low, a.ci_high, b.ci_low, b.ci_high)):
        return True
    return a.ci_low <= b.ci_high and b.ci_low <= a.ci_high
