"""The analysis record (``analysis.json``, schema ``ddpbench.analysis``): writer, validator and reader.

``ddpbench-report`` writes one per report: the paired analysis as plain JSON (every non-finite number
as null) plus ``sweep_dirs``, ``skipped``, ``generated_at`` and ``ddpbench_version``. The body's fields
are the attributes of :class:`ddpbench.analysis.results.Analysis` (docs/analysis.md); this module owns
the envelope and what a reader may rely on. Readers use :func:`read_analysis_record`, which accepts
every version below and upgrades it in memory.

Version history (bump :data:`SCHEMA_VERSION` on any change a reader could notice):

- 1 (ddpbench 0.1.0): first version.
- 2: robust statistics, more rows, disturbance. Each comparison adds ``workload``, ``robust`` (per
  metric: Hodges–Lehmann estimate, Wilcoxon interval and its achieved level, bootstrap interval of
  the median for the per-step metrics), ``pct_notes`` (percentages left out for a near-zero
  baseline, with the reason), ``rows`` (per-phase time, memory peaks, the workload's own metrics),
  ``efficiency`` (achieved TFLOP/s per side) and ``flags`` (disturbed and outlying pairs); its
  ``metrics`` add ``step_median_overhead_ms/_pct``, ``wall_diff_s``, ``startup_diff_pct`` and
  ``teardown_diff_pct``. The record adds ``disturbed_trials``, ``tool_artifacts`` and
  ``tool_ranking``. A version 1 record is upgraded with all of them empty (``workload`` ``mlp``).
- 3: the verdict is on the per-step cost and the cost projected onto a job of ``job_hours``, not on a
  short trial's wall time. The record adds ``job_hours``; each comparison's ``metrics`` add
  ``fixed_diff_s`` (start-up Δ + teardown Δ) and ``projected_overhead_pct``, its ``pairs`` add
  ``fixed_diff_s``, its ``verdict.per_metric`` is on ``step_overhead_pct`` and
  ``projected_overhead_pct``, and each ``excluded`` entry adds ``cause`` (``unpaired`` or ``rerun``;
  a re-run pair's ``reason`` is why it was disturbed). A version 2 record is upgraded with
  ``job_hours`` null and each excluded pair's ``cause`` read from its reason's wording then
  (``... re-run, not counted`` is ``rerun``); its verdicts stay those of wall and throughput overhead.
- 4: within-trial switching. Each comparison adds ``switched`` (the mode's within-trial per-step cost:
  ``overhead_ms`` and ``overhead_pct`` with their interval, ``off_step_ms``, ``n_trials``, ``quads``,
  ``method``, ``df``, ``heterogeneity_p``, ``what``, ``stays_on``; :mod:`ddpbench.analysis.switching`) and
  ``switched_base`` (the baseline's no-op switch: the method's noise floor), each null when its trials did
  not switch; its ``pairs`` add ``switched_step_overhead_ms`` (the mode trial's within-trial estimate, null when
  it did not switch). An earlier record is upgraded with ``switched`` and ``switched_base`` null.
- 5: the verdict uses every figure that may decide (:mod:`ddpbench.analysis.verdict`). Each comparison's
  ``verdict`` adds ``decided_by`` (the metrics that decided; empty when inconclusive) and ``assumption_holds``
  (whether the within-trial figure's assumption survived the data; null where it could not be checked),
  ``lower_bound_pct`` ([mean, low, high] of the within-trial lower bound the verdict weighed, null without
  switching) and ``lower_bound_confidence`` (its interval's level), and its ``per_metric`` may hold
  ``switched_overhead_pct`` (the within-trial lower bound); its ``pairs`` add ``switched_step_overhead_pct``. In a
  switching sweep every whole-trial figure is now that of the tool fully on (each trial's off-blocks counted at
  its on-blocks' step: :func:`ddpbench.analysis.switching.full_on_row`; they mixed on- and off-blocks before). An
  earlier record is upgraded with ``decided_by`` empty and ``assumption_holds`` null; its verdicts stay those it was
  written with.
- 6: the versions comparison. The record adds ``versions``: ``regression_pct``, ``rule``, ``units`` and
  ``steps`` (each version against the previous one in its sweep's ``versions=`` list: ``condition_id``,
  ``mode``, ``previous``, ``current``, the versions imported, ``n_pairs``, ``metrics`` with their intervals,
  ``verdict``, ``unknown_formats``; empty without ``versions=``; :func:`ddpbench.analysis.versions.versions_to_dict`).
  An earlier record is upgraded with ``versions`` null (not recorded), which :func:`version_verdicts` reads as none.
- 7: where a cost lands. Each calibration item adds ``side`` (``host``, ``device``, ``start-up``, ``teardown``),
  ``knowable`` (whether the loop lets its figure show the cost; null: not assessed) and ``where`` (why); items for
  the device wait and for the GPU split (``host wait in GPU idle``, ``device wait in GPU busy``, ``device wait in
  the host step``) may appear. ``rows`` may hold the groups ``gpu`` (host step, GPU busy, GPU idle, ms per step)
  and ``startup`` (the start-up's parts, s). An earlier record's items are upgraded with their side from their name,
  ``knowable`` null and ``where`` empty.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ddpbench.formats.reader import Format

SCHEMA = "ddpbench.analysis"
SCHEMA_VERSION = 7
#: the record's file name in a report's output dir
ANALYSIS_FILE = "analysis.json"

#: fields version 2 adds: at the top level, and in each comparison, with the value a version 1 record gets
ADDED_IN_V2: Dict[str, Any] = {"disturbed_trials": [], "tool_artifacts": [], "tool_ranking": []}
COMPARISON_ADDED_IN_V2: Dict[str, Any] = {"workload": "mlp", "robust": {}, "pct_notes": {}, "rows": [], "efficiency": [], "flags": []}
#: fields version 3 adds at the top level, with the value an earlier record gets
ADDED_IN_V3: Dict[str, Any] = {"job_hours": None}
#: how a version 2 record's reason of a re-run pair ended (its only mark of being one)
_V2_RERUN_ENDING = "re-run, not counted"

#: top-level fields every version holds, with their JSON types
REQUIRED_FIELDS: Dict[str, Tuple[type, ...]] = {
    "baseline": (str,),
    "budget_pct": (int, float),
    "confidence": (int, float),
    "comparisons": (list,),
    "failed_trials": (list,),
    "n_trials": (int,),
    "n_ok": (int,),
    "noise_floors": (dict,),
    "methods": (dict,),
}


def build_analysis_record(body: Mapping[str, Any]) -> Dict[str, Any]:
    """The record for ``body`` (the analysis as JSON-ready data): schema and version first."""
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **body}


def _check(record: Dict[str, Any]) -> List[str]:
    """The top-level fields every version holds (the first problem)."""
    for key, types in REQUIRED_FIELDS.items():
        if key not in record:
            return [f"partial record: missing {key}"]
        if not isinstance(record[key], types) or isinstance(record[key], bool):
            return [f"field {key!r} has type {type(record[key]).__name__}"]
    return []


def _v1_to_v2(record: Dict[str, Any]) -> Dict[str, Any]:
    comparisons = [
        {**{k: copy.deepcopy(v) for k, v in COMPARISON_ADDED_IN_V2.items()}, **c} if isinstance(c, dict) else c
        for c in record["comparisons"]
    ]
    return {**{k: copy.deepcopy(v) for k, v in ADDED_IN_V2.items()}, **record, "comparisons": comparisons}


def _v2_to_v3(record: Dict[str, Any]) -> Dict[str, Any]:
    comparisons = [{**c, "excluded": [_with_cause(e) for e in c.get("excluded") or []]} if isinstance(c, dict) else c
                   for c in record["comparisons"]]
    return {**ADDED_IN_V3, **record, "comparisons": comparisons}


def _v3_to_v4(record: Dict[str, Any]) -> Dict[str, Any]:
    comparisons = [{"switched": None, "switched_base": None, **c} if isinstance(c, dict) else c
                   for c in record["comparisons"]]
    return {**record, "comparisons": comparisons}


def _v4_to_v5(record: Dict[str, Any]) -> Dict[str, Any]:
    comparisons = [{**c, "verdict": {"decided_by": [], "assumption_holds": None, "lower_bound_pct": None,
                                     "lower_bound_confidence": None, **c["verdict"]}}
                   if isinstance(c, dict) and isinstance(c.get("verdict"), dict) else c
                   for c in record["comparisons"]]
    return {**record, "comparisons": comparisons}


def _v5_to_v6(record: Dict[str, Any]) -> Dict[str, Any]:
    return {"versions": None, **record}


#: an earlier calibration item's name -> its side
_V6_SIDES = {"startup difference": "start-up", "teardown difference": "teardown"}


def _item_v7(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    return {"side": _V6_SIDES.get(str(item.get("name")), "host"), "knowable": None, "where": "", **item}


def _v6_to_v7(record: Dict[str, Any]) -> Dict[str, Any]:
    comparisons = []
    for c in record["comparisons"]:
        calibration = c.get("calibration") if isinstance(c, dict) else None
        if isinstance(calibration, dict) and isinstance(calibration.get("items"), list):
            c = {**c, "calibration": {**calibration, "items": [_item_v7(i) for i in calibration["items"]]}}
        comparisons.append(c)
    return {**record, "comparisons": comparisons}


#: the format as the reader contract (:mod:`ddpbench.formats.reader`) reads it; a new version adds its step
FORMAT = Format(SCHEMA, SCHEMA_VERSION, oldest=1, upgrades={1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5,
                                                          5: _v5_to_v6, 6: _v6_to_v7}, check=_check)


def validate_analysis_record(record: Any) -> Optional[str]:
    """Why a decoded ``analysis.json`` cannot be used (one line), or None when it can (any known version)."""
    problems = FORMAT.problems(record)
    return problems[0] if problems else None


def version_verdicts(record: Mapping[str, Any]) -> Optional[List[str]]:
    """The verdict of every version step in a (current-version) record; None when it holds no versions comparison."""
    versions = record.get("versions")
    if not isinstance(versions, dict) or not isinstance(versions.get("steps"), list):
        return None
    return [str(step.get("verdict")) if isinstance(step, dict) else "" for step in versions["steps"]]


def _with_cause(excluded: Any) -> Any:
    if not isinstance(excluded, dict) or "cause" in excluded:
        return excluded
    rerun = str(excluded.get("reason", "")).endswith(_V2_RERUN_ENDING)
    return {**excluded, "cause": "rerun" if rerun else "unpaired"}


def read_analysis_record(path: "str | os.PathLike[str]") -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """``(record, None)`` for a usable ``analysis.json`` of any known version, upgraded; else ``(None, why)``."""
    record, error = FORMAT.read(path)
    return record, (error.problem if error is not None else None)
