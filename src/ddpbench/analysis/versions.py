"""Versions compared: each tool version against the previous one in the sweep's list, paired within the repeat. Pure.

The verdict is on the per-step Δ % against ``regression_pct`` (:data:`VERDICT_RULE`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Sequence, Tuple

import pandas as pd

from ddpbench.analysis.figures import finite
from ddpbench.analysis.pairing import pair_table, str_or_none
from ddpbench.analysis.results import jsonable
from ddpbench.analysis.stats import PairedSummary, paired_summary
from ddpbench.choices import Verdict
from ddpbench.formats.analysis_record import REGRESSION_WORDS
from ddpbench.formats.condition import arm_name

#: per-version-step metrics: key -> unit
METRICS = {"step_ms": "ms", "step_pct": "%", "startup_s": "s", "teardown_s": "s", "memory_mb": "MB"}
VERDICT_RULE = ("per-step Δ % of current - previous, 95 % paired t interval: regression when wholly above "
                "regression_pct, no regression when wholly at or below, else inconclusive (also with fewer than 2 pairs)")


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
    # over the threshold: a regression (spelled as REGRESSION_WORDS in the record and the report)
    verdict: Verdict
    # trials of these arms whose tool summary had a format this ddpbench does not know
    unknown_formats: Tuple[str, ...] = ()

    @property
    def n_pairs(self) -> int:
        """Pairs behind the per-step figure."""
        return self.metrics["step_ms"].n


def regression_verdict(step_pct: PairedSummary, regression_pct: float) -> Verdict:
    """A per-step Δ % interval against the threshold: ``over`` (a regression), ``within`` (none) or ``inconclusive``."""
    if step_pct.n < 2 or not (math.isfinite(step_pct.ci_low) and math.isfinite(step_pct.ci_high)):
        return Verdict.inconclusive
    if step_pct.ci_low > regression_pct:
        return Verdict.over
    if step_pct.ci_high <= regression_pct:
        return Verdict.within
    return Verdict.inconclusive


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


def imported_version(rows: pd.DataFrame, arm: str) -> str:
    """The tool version(s) the ranks of ``arm``'s trials imported, joined ("" when not recorded)."""
    column = "arm_version" if "arm_version" in rows else None
    values = sorted({str_or_none(v) or "" for v in rows.loc[rows["mode"] == arm, column]} - {""}) if column else []
    return ", ".join(values)


def _unknown(rows: pd.DataFrame, arms: Sequence[str]) -> Tuple[str, ...]:
    if "tool_format" not in rows:
        return ()
    hit = rows[(rows["mode"].isin(list(arms))) & (rows["tool_format"] == "unknown")]
    return tuple(sorted({str_or_none(p) or "" for p in hit.get("tool_problem", pd.Series(dtype=str))} - {""}))


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
                    b, x = finite(base.get("peak_memory_bytes")), finite(other.get("peak_memory_bytes"))
                    memory.append((x - b) / 1e6 if b is not None and x is not None else math.nan)
                metrics = {key: paired_summary([getattr(p, field) for p in pairs]) for key, field in (
                    ("step_ms", "step_overhead_ms"), ("step_pct", "step_overhead_pct"),
                    ("startup_s", "startup_diff_s"), ("teardown_s", "teardown_diff_s"))}
                metrics["memory_mb"] = paired_summary(memory)
                steps.append(VersionStep(str(cond), mode, previous, current, imported_version(rows, previous),
                                         imported_version(rows, current), metrics,
                                         regression_verdict(metrics["step_pct"], regression_pct),
                                         _unknown(rows, [previous, current])))
    return steps


def verdicts_exit_code(verdicts: Iterable[Verdict]) -> int:
    """``--fail-on-regression``: 1 when one verdict is a regression (``over``), else 3 when one is not ``within``,
    else 0."""
    seen = set(verdicts)
    return 1 if Verdict.over in seen else 3 if seen - {Verdict.within} else 0


def versions_to_dict(steps: Sequence[VersionStep], regression_pct: float) -> Dict[str, Any]:
    """The versions comparison as analysis.json's ``versions`` (docs/formats.md; non-finite numbers as None)."""
    return {
        "regression_pct": regression_pct,
        "rule": VERDICT_RULE,
        "units": dict(METRICS),
        "steps": [{"condition_id": s.condition_id, "mode": s.mode, "previous": s.previous, "current": s.current,
                   "previous_version": s.previous_version, "current_version": s.current_version,
                   "n_pairs": s.n_pairs, "metrics": jsonable(s.metrics),
                   "verdict": REGRESSION_WORDS[s.verdict], "unknown_formats": list(s.unknown_formats)} for s in steps],
    }
