"""Why a ``repeat=auto`` sweep stopped adding pairs (``stopping.json``, schema ``ddpbench.stopping``).

The sweep driver writes it into the sweep dir after every decision (:func:`write_stopping_record`);
the report reads it (:func:`read_stopping_record`) and says, per condition, why the sweep stopped.
``docs/formats.md`` describes the fields for humans.

Version history:

- 1: first version.
- 2: ``precision.disturbed=rerun``. The rule adds ``disturbed`` (``rerun`` or ``count``); each
  condition adds ``condition_id`` (its trials' ``condition_id``, null before its first pair),
  ``excluded`` (the disturbed pairs not counted: ``repeat`` and ``why``) and ``counted`` (the
  repeats whose pairs the decision used). A version 1 record is read with ``disturbed`` ``count``,
  ``condition_id`` null, ``excluded`` empty and ``counted`` null (not recorded).
"""

import copy
import json
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from ddpbench.io import write_json_atomic

SCHEMA = "ddpbench.stopping"
SCHEMA_VERSION = 2
#: every version :func:`read_stopping_record` reads
KNOWN_VERSIONS = frozenset(range(1, SCHEMA_VERSION + 1))
#: the record's file name inside a sweep dir
STOPPING_FILE = "stopping.json"
#: condition fields version 2 adds, with the value a version 1 record is read with
CONDITION_ADDED_IN_V2: Dict[str, Any] = {"condition_id": None, "excluded": [], "counted": None}


def build_stopping_record(rule: Mapping[str, Any], conditions: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The payload: ``rule`` (metric, budget, confidence, spending, limits) and one entry per condition.

    Each condition entry: ``condition`` (the overrides it shares), ``condition_id`` (its trials'),
    ``pairs`` (pairs run, counted or not), ``excluded`` (``{"repeat", "why"}`` of each disturbed pair
    left out), ``counted`` (the repeats the decision used), ``reason`` (why it stopped, or
    ``running``) and ``comparisons`` (per mode: the decision of
    :func:`ddpbench.analysis.sequential.decide` as a dict).
    """
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "rule": dict(rule),
            "conditions": [dict(c) for c in conditions]}


def write_stopping_record(sweep_dir: "str | os.PathLike[str]", record: Mapping[str, Any]) -> None:
    """Write ``record`` as ``stopping.json`` in ``sweep_dir``, atomically."""
    write_json_atomic(os.path.join(sweep_dir, STOPPING_FILE), dict(record))


def validate_stopping_record(record: Any) -> Optional[str]:
    """Why a decoded ``stopping.json`` cannot be used (one line), or None."""
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        return f"not a {SCHEMA} record"
    if record.get("schema_version") not in KNOWN_VERSIONS:
        return f"unknown schema_version {record.get('schema_version')!r} of {SCHEMA}"
    if not isinstance(record.get("rule"), dict) or not isinstance(record.get("conditions"), list):
        return "partial record: rule or conditions missing"
    return None


def read_stopping_record(sweep_dir: "str | os.PathLike[str]") -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """``(record, None)``; ``(None, None)`` when the sweep has none; ``(None, why)`` when it is unusable."""
    path = os.path.join(sweep_dir, STOPPING_FILE)
    if not os.path.exists(path):
        return None, None
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError) as exc:
        return None, f"{path}: {exc}"
    reason = validate_stopping_record(record)
    return (None, f"{path}: {reason}") if reason else (_upgraded(record), None)


def _upgraded(record: Dict[str, Any]) -> Dict[str, Any]:
    """``record`` with the fields of the current version (earlier versions get their defaults)."""
    if record["schema_version"] >= 2:
        return record
    rule = {"disturbed": "count", **record["rule"]}
    conditions = [{**copy.deepcopy(CONDITION_ADDED_IN_V2), **c} if isinstance(c, dict) else c
                  for c in record["conditions"]]
    return {**record, "rule": rule, "conditions": conditions}
