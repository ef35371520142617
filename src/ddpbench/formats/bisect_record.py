"""A bisection of a tool's commit range (``bisect.json``, schema ``ddpbench.bisect``), written after every look
at a commit and read back to resume. Fields and versions: docs/formats.md.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ddpbench.choices import Choice, Verdict
from ddpbench.formats.reader import Format
from ddpbench.io import write_json_atomic

SCHEMA = "ddpbench.bisect"
SCHEMA_VERSION = 1
#: the record's file name inside a bisection's folder
BISECT_FILE = "bisect.json"


class StepState(Choice):
    """A measured commit's status while it has no verdict."""

    running = "running"  # being measured
    failed = "failed"  # a trial failed: skipped


#: a measured commit's ``status``: its verdict (``over``: slower than the good commit by more than
#: ``regression_pct``: bad; ``within``: not: good; ``inconclusive``: no verdict within the limits: skipped), or its
#: state without one
StepStatus = Union[Verdict, StepState]
STEP_STATUSES: Tuple[StepStatus, ...] = (StepState.running, Verdict.over, Verdict.within, Verdict.inconclusive,
                                         StepState.failed)


class BisectStatus(Choice):
    """The bisection's outcome (``result.status``)."""

    running = "running"
    found = "found"  # the first bad commit
    inconclusive = "inconclusive"  # candidates left, none measurable
    no_regression = "no_regression"  # the bad commit is not slower than the good one by more than regression_pct


RESULT_STATUSES: Tuple[BisectStatus, ...] = tuple(BisectStatus)


def step_status(text: str) -> StepStatus:
    """A step's ``status`` as a record spells it, typed (ValueError when it is none of :data:`STEP_STATUSES`)."""
    try:
        return Verdict(text)
    except ValueError:
        return StepState(text)
#: the fields a record must have
REQUIRED = ("name", "mode", "repo", "good", "bad", "commits", "rule", "steps", "result")


def build_bisect_record(inputs: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], result: Mapping[str, Any],
                        started_at: str, updated_at: str, ddpbench_version: str) -> Dict[str, Any]:
    """The payload: ``inputs`` (``name``, ``mode``, ``package``, ``repo``, ``good``/``bad`` as ``{ref, commit,
    subject}``, ``commits``: the range oldest first, each ``{commit, subject}``, ``overrides``, ``config_dir``,
    ``rule``), one entry per measured commit in the order measured (``steps``), and the ``result``."""
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **dict(inputs), "steps": [dict(s) for s in steps],
            "result": dict(result), "started_at": started_at, "updated_at": updated_at,
            "ddpbench_version": ddpbench_version}


def write_bisect_record(folder: "str | os.PathLike[str]", record: Mapping[str, Any]) -> None:
    """Write ``record`` as ``bisect.json`` in ``folder``, atomically."""
    write_json_atomic(os.path.join(folder, BISECT_FILE), dict(record))


def _check(record: Dict[str, Any]) -> List[str]:
    missing = [key for key in REQUIRED if key not in record]
    if missing:
        return [f"partial record: missing {', '.join(missing)}"]
    problems = []
    if not isinstance(record["steps"], list) or not isinstance(record["commits"], list):
        problems.append("partial record: steps and commits must be lists")
    elif any(not isinstance(s, dict) or s.get("status") not in STEP_STATUSES for s in record["steps"]):
        problems.append(f"a step's status is not one of {', '.join(STEP_STATUSES)}")
    if not isinstance(record["result"], dict) or record["result"].get("status") not in RESULT_STATUSES:
        problems.append(f"result.status is not one of {', '.join(RESULT_STATUSES)}")
    return problems


#: the format as the reader contract (:mod:`ddpbench.formats.reader`) reads it
FORMAT = Format(SCHEMA, SCHEMA_VERSION, oldest=1, upgrades={}, check=_check)
#: why a decoded ``bisect.json`` cannot be used (one line), or None
validate_bisect_record = FORMAT.first_problem


def read_bisect_record(folder: "str | os.PathLike[str]") -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """``(record, None)``; ``(None, None)`` when the folder has none; ``(None, why)`` (naming the file) when it is unusable."""
    return FORMAT.read_if_present(os.path.join(folder, BISECT_FILE))
