"""The one reader contract of the formats (ddpbench.formats.reader), on real records of earlier versions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict

import pytest

from ddpbench.collect import collect_trials
from ddpbench.errors import DdpbenchError
from ddpbench.formats import analysis_record, bisect_record, rank_record, stopping_record, trial_record
from ddpbench.formats.reader import Format, FormatError

DATA = Path(__file__).parent / "data"


def test_a_real_version_1_trial_record_is_read_and_upgraded(tmp_path: Path) -> None:
    """``trial-v1.json`` was written by ddpbench at the commit before trial record version 2 (a tiny native trial)."""
    raw = json.loads((DATA / "trial-v1.json").read_text())
    assert raw["schema_version"] == 1 and not set(trial_record.ADDED_IN_V2) & set(raw)
    record = trial_record.FORMAT.load(DATA / "trial-v1.json")
    assert record["schema_version"] == 1 and record["status"] == "ok" and record["mode"] == "native"
    assert {key: record[key] for key in trial_record.ADDED_IN_V2} == {key: None for key in trial_record.ADDED_IN_V2}
    assert record["wall_s"] == raw["wall_s"] and record["config_hash"] == raw["config_hash"]
    job = tmp_path / "sweep" / "mode=native,repeat=1"
    job.mkdir(parents=True)
    shutil.copy(DATA / "trial-v1.json", job / trial_record.TRIAL_FILE)
    collected = collect_trials([tmp_path / "sweep"])
    assert not collected.skipped and len(collected.frame) == 1
    assert collected.frame.iloc[0]["status"] == "ok" and collected.frame.iloc[0]["mode"] == "native"


def test_a_real_version_1_rank_record_is_read_and_upgraded() -> None:
    record, problems = rank_record.read_rank_record(DATA / "rank-v1.json")
    assert problems == [] and record is not None and record["schema_version"] == 1
    assert record["workload"] == "mlp" and record["timing"] == "step" and record["phase_time_ms"] is None


def _step(key: str) -> Any:
    def add(record: Dict[str, Any]) -> Dict[str, Any]:
        return {**record, key: record.get("order", "") + key, "order": record.get("order", "") + key}
    return add


def test_upgrade_steps_run_in_order_from_the_record_s_version(tmp_path: Path) -> None:
    three = Format("t.schema", 3, oldest=1, upgrades={1: _step("a"), 2: _step("b")})
    assert three.known_versions == {1, 2, 3}
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema": "t.schema", "schema_version": 1}))
    assert three.load(path)["order"] == "ab"
    path.write_text(json.dumps({"schema": "t.schema", "schema_version": 2}))
    assert three.load(path)["order"] == "b"
    path.write_text(json.dumps({"schema": "t.schema", "schema_version": 3}))
    assert "order" not in three.load(path)
    with pytest.raises(TypeError, match="no upgrade step from version"):
        Format("t.schema", 3, oldest=1, upgrades={1: _step("a")})


@pytest.mark.parametrize("module", [rank_record, trial_record, analysis_record, stopping_record, bisect_record])
def test_every_format_refuses_the_same_way(module: Any, tmp_path: Path) -> None:
    """One error type naming the file and the format, and the same one-line reasons, in every format."""
    fmt: Format = module.FORMAT
    path = tmp_path / "future.json"
    path.write_text(json.dumps({"schema": fmt.schema, "schema_version": fmt.version + 1}))
    with pytest.raises(FormatError) as caught:
        fmt.load(path)
    assert isinstance(caught.value, DdpbenchError)
    assert caught.value.path == str(path) and caught.value.schema == fmt.schema
    assert caught.value.problem.startswith(f"unknown schema_version {fmt.version + 1} of {fmt.schema} (this reader knows 1")
    assert str(caught.value).startswith(f"{path} ({fmt.schema}): unknown schema_version")
    for text, reason in (("", "empty file"), ("{", "malformed JSON"), ('{"schema": "x"}', "unknown schema 'x'"),
                         ("[]", "not a JSON object (list)")):
        path.write_text(text)
        assert fmt.read(path)[1].problem.startswith(reason)  # type: ignore[union-attr]
    assert fmt.read(tmp_path / "absent.json")[1].problem.startswith("unreadable")  # type: ignore[union-attr]
