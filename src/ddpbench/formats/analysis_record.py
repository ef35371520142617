"""The analysis record (``analysis.json``, schema ``ddpbench.analysis``): writer, validator and reader.

The paired analysis as plain JSON (non-finite numbers as null) in its envelope; :func:`read_analysis_record`
upgrades every known version in memory. Fields and version history: docs/formats.md.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ddpbench.choices import Verdict
from ddpbench.formats.reader import Format

SCHEMA = "ddpbench.analysis"
SCHEMA_VERSION = 7
#: the record's file name in a report's output dir
ANALYSIS_FILE = "analysis.json"

#: fields version 2 adds: at the top level, and in each comparison, with the value a version 1 record gets
ADDED_IN_V2: Dict[str, Any] = {"disturbed_trials": [], "tool_artifacts": [], "tool_ranking": []}
COMPARISON_ADDED_IN_V2: Dict[str, Any] = {"workload": "mlp", "robust": {}, "pct_notes": {}, "rows": [], "efficiency": [],
                                          "flags": []}
#: fields version 3 adds at the top level, with the value an earlier record gets
ADDED_IN_V3: Dict[str, Any] = {"job_hours": None}
#: how a version 2 record's reason of a re-run pair ended (its only mark of being one)
_V2_RERUN_ENDING = "re-run, not counted"

#: how a version step's verdict (the per-step change against the threshold) is spelled in ``versions.steps``
REGRESSION_WORDS: Dict[Verdict, str] = {Verdict.over: "regression", Verdict.within: "no regression",
                                        Verdict.inconclusive: "inconclusive"}

#: top-level fields every version holds, with their JSON types
REQUIRED_FIELDS: Dict[str, Tuple[type, ...]] = {
    "baseline": (str,), "budget_pct": (int, float), "confidence": (int, float), "comparisons": (list,),
    "failed_trials": (list,), "n_trials": (int,), "n_ok": (int,), "noise_floors": (dict,), "methods": (dict,),
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
    comparisons = [{**copy.deepcopy(COMPARISON_ADDED_IN_V2), **c} if isinstance(c, dict) else c
                   for c in record["comparisons"]]
    return {**copy.deepcopy(ADDED_IN_V2), **record, "comparisons": comparisons}


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
#: why a decoded ``analysis.json`` of any known version cannot be used (one line), or None
validate_analysis_record = FORMAT.first_problem
#: ``(record, None)`` for a usable ``analysis.json`` of any known version, upgraded; else ``(None, why)``
read_analysis_record = FORMAT.read_problem


def version_verdicts(record: Mapping[str, Any]) -> Optional[List[Verdict]]:
    """The verdict of every version step in a (current-version) record (one it does not spell as
    :data:`REGRESSION_WORDS` does: inconclusive); None when it holds no versions comparison."""
    versions = record.get("versions")
    if not isinstance(versions, dict) or not isinstance(versions.get("steps"), list):
        return None
    verdict_of = {word: verdict for verdict, word in REGRESSION_WORDS.items()}
    return [verdict_of.get(str(step.get("verdict")) if isinstance(step, dict) else "", Verdict.inconclusive)
            for step in versions["steps"]]


def _with_cause(excluded: Any) -> Any:
    if not isinstance(excluded, dict) or "cause" in excluded:
        return excluded
    rerun = str(excluded.get("reason", "")).endswith(_V2_RERUN_ENDING)
    return {**excluded, "cause": "rerun" if rerun else "unpaired"}
