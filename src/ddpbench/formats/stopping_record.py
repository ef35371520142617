"""Why a ``repeat=auto`` sweep stopped adding pairs (``stopping.json``, schema ``ddpbench.stopping``), written
into the sweep dir after every decision. Fields and versions: docs/formats.md.
"""

import copy
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ddpbench.formats.reader import Format
from ddpbench.io import write_json_atomic

SCHEMA = "ddpbench.stopping"
SCHEMA_VERSION = 2
#: the record's file name inside a sweep dir
STOPPING_FILE = "stopping.json"
#: condition fields version 2 adds, with the value a version 1 record is read with
CONDITION_ADDED_IN_V2: Dict[str, Any] = {"condition_id": None, "excluded": [], "counted": None}


def build_stopping_record(rule: Mapping[str, Any], conditions: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The payload: ``rule`` (metric, budget, confidence, spending, limits) and one entry per condition (its fields:
    docs/formats.md; ``comparisons``: per mode, :func:`ddpbench.analysis.sequential.decide`'s decision as a dict)."""
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "rule": dict(rule),
            "conditions": [dict(c) for c in conditions]}


def write_stopping_record(sweep_dir: "str | os.PathLike[str]", record: Mapping[str, Any]) -> None:
    """Write ``record`` as ``stopping.json`` in ``sweep_dir``, atomically."""
    write_json_atomic(os.path.join(sweep_dir, STOPPING_FILE), dict(record))


def _check(record: Dict[str, Any]) -> List[str]:
    if not isinstance(record.get("rule"), dict) or not isinstance(record.get("conditions"), list):
        return ["partial record: rule or conditions missing"]
    return []


def _v1_to_v2(record: Dict[str, Any]) -> Dict[str, Any]:
    rule = {"disturbed": "count", **record["rule"]}
    conditions = [{**copy.deepcopy(CONDITION_ADDED_IN_V2), **c} if isinstance(c, dict) else c
                  for c in record["conditions"]]
    return {**record, "rule": rule, "conditions": conditions}


#: the format as the reader contract (:mod:`ddpbench.formats.reader`) reads it
FORMAT = Format(SCHEMA, SCHEMA_VERSION, oldest=1, upgrades={1: _v1_to_v2}, check=_check)
#: why a decoded ``stopping.json`` cannot be used (one line), or None
validate_stopping_record = FORMAT.first_problem


def read_stopping_record(sweep_dir: "str | os.PathLike[str]") -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """``(record, None)``; ``(None, None)`` when the sweep has none; ``(None, why)`` (naming the file) when it is unusable."""
    return FORMAT.read_if_present(os.path.join(sweep_dir, STOPPING_FILE))
