"""The versioned formats: each module's writer, validator and reader, and readers of earlier versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpbench.analysis.paired import analysis_to_dict, analyze
from ddpbench.collect import collect_trials
from ddpbench.config import ClusterConfig, DdpbenchConfig
from ddpbench.config.decided import decide
from ddpbench.formats import analysis_record, rank_record, trial_record
from ddpbench.trial.outcome import classify, read_rank_records
from helpers.trials import make_rank_record, make_sweep, make_trial


def test_trial_record_reader_accepts_every_known_version(tmp_path: Path) -> None:
    assert trial_record.FORMAT.known_versions == set(range(1, trial_record.SCHEMA_VERSION + 1))
    for version in sorted(trial_record.FORMAT.known_versions):
        path = tmp_path / f"v{version}.json"
        path.write_text(json.dumps({**make_trial(), "schema_version": version}))
        record, reason = trial_record.read_trial_record(path)
        assert reason is None and record is not None
        assert record["schema_version"] == version and record["mode"] == "native"
    path = tmp_path / "future.json"
    path.write_text(json.dumps({**make_trial(), "schema_version": trial_record.SCHEMA_VERSION + 1}))
    record, reason = trial_record.read_trial_record(path)
    assert record is None and "unknown schema_version" in str(reason)


def test_node_entries_are_built_in_one_shape() -> None:
    entry = trial_record.node_entry(1, "h", wall_s=2.0, exit_code=0, spawn_epoch=10.0, exit_epoch=12.0)
    assert list(entry) == ["node_rank", "hostname", "wall_s", "exit_code", "spawn_epoch", "exit_epoch",
                           "killed_by", "stdout", "stderr"]
    ranks = [make_rank_record(0, node_rank=1), make_rank_record(1, node_rank=1)]
    inferred = trial_record.nodes_from_ranks(ranks, [1, 2], nproc_per_node=2)
    assert list(inferred) == [1]
    assert inferred[1]["source"] == "ranks" and inferred[1]["exit_code"] == 0 and inferred[1]["wall_s"] is None
    assert inferred[1]["ranks_span_s"] == pytest.approx(ranks[0]["timestamps"]["exit"] - 1.0)
    assert set(entry) <= set(inferred[1])


def test_rank_record_checks_ask_a_version_only_for_its_own_fields() -> None:
    """A field version 2 requires is not asked of a version 1 record, and is asked of a version 2 one."""
    v1 = make_rank_record(0)
    assert v1["schema_version"] == 1 and "workload" not in v1
    assert rank_record.validate_rank_record(v1) == []
    v2 = {**v1, "schema_version": 2}
    assert {f"{name}: missing" for name in rank_record.FIELDS_V2} <= set(rank_record.validate_rank_record(v2))
    assert rank_record.validate_rank_record(rank_record.upgrade_rank_record(v1) | {"schema_version": 2}) == []
    v3 = {**rank_record.upgrade_rank_record(v1), "schema_version": 3}
    del v3["blocks"]
    assert "blocks: missing" in rank_record.validate_rank_record(v3)
    v4 = {**rank_record.upgrade_rank_record(v1), "schema_version": 4}
    assert (v4["host_sync"], v4["gpu_time_ms"], v4["startup_s"], v4["gc"]) == ("none", None, None, None)
    assert v4["inject"]["device_step_ms"] == 0.0 and rank_record.validate_rank_record(v4) == []
    bad = {**v4, "host_sync": "sometimes", "gpu_time_ms": {"busy": {"mean": 1.0}, "idle": {}, "steps": 3},
           "startup_s": {"script": -1.0}, "gc": {"mode": "maybe", "collections": [1, 2]},
           "inject": {k: v for k, v in v4["inject"].items() if k != "device_step_ms"}}
    problems = rank_record.validate_rank_record(bad)
    for start in ("host_sync: 'sometimes'", "gpu_time_ms.busy.median", "gpu_time_ms.idle.mean",
                  "gpu_time_ms.late_reads", "startup_s.script", "startup_s.warmup", "gc.mode", "gc.collections",
                  "inject.device_step_ms"):
        assert any(p.startswith(start) for p in problems), (start, problems)
    on_gpu = {**v4, "device": "cuda", "memory": {**v4["memory"], "cuda_peak_allocated_bytes": 1}}
    assert rank_record.validate_rank_record(on_gpu) == ["gpu_time_ms: null on a cuda rank of ddpbench's loop"]
    own = rank_record.upgrade_rank_record({**make_rank_record(0), "schema_version": 2, "workload": "train.py",
                                           "data": {"loader": "own", "workers": None, "prefetch_factor": None,
                                                    "pin_memory": False},
                                           "timing": "step", "phase_time_ms": None, "memory": v4["memory"]})
    assert own["host_sync"] == "own"  # a user's script ran its own loop
    v5 = {**rank_record.upgrade_rank_record(v1), "schema_version": 5}
    assert v5["timed_cpu_s"] is None and rank_record.validate_rank_record(v5) == []
    assert "timed_cpu_s: missing" in rank_record.validate_rank_record({k: v for k, v in v5.items()
                                                                      if k != "timed_cpu_s"})
    assert rank_record.validate_rank_record({**v5, "timed_cpu_s": {"user": 1.0, "system": 0.5, "total": 1.5}}) == [
        "timed_cpu_s.per_step_ms: missing or not a finite number"]
    assert rank_record.validate_rank_record({**v1, "schema_version": 6})[0] == (
        "unknown schema_version 6 of ddpbench.rank (this reader knows 1, 2, 3, 4, 5)")


def test_earlier_trial_and_analysis_records_are_read_with_the_loop_fields() -> None:
    """A trial record before version 5 ran ddpbench's sync-free loop (or the job's own); an analysis record before
    version 5 gets each calibration item's side from its name."""
    builtin = trial_record.FORMAT.upgrade({**make_trial(), "schema_version": 4})
    assert (builtin["host_sync"], builtin["gpu_time_ms"], builtin["startup_split_s"], builtin["gc"]) == (
        "none", None, None, None)
    framework = make_trial(schema_version=4)
    framework["config"]["workload"] = {"name": "hf_trainer", "framework": "transformers"}
    assert trial_record.FORMAT.upgrade(framework)["host_sync"] == "own"
    items = [{"name": "per-step overhead", "unit": "ms", "injected": 2.0, "recovered": 2.1, "error_pct": 5.0,
              "within_tolerance": True},
             {"name": "startup difference", "unit": "s", "injected": 1.0, "recovered": 1.0, "error_pct": 0.0,
              "within_tolerance": True}]
    old = {"schema": analysis_record.SCHEMA, "schema_version": 4, "baseline": "native", "budget_pct": 2.0,
           "confidence": 0.95, "comparisons": [{"mode": "inject", "calibration": {"items": items}}],
           "failed_trials": [], "n_trials": 2, "n_ok": 2, "noise_floors": {}, "methods": {}}
    upgraded = analysis_record.FORMAT.upgrade(old)["comparisons"][0]["calibration"]["items"]
    assert [(i["side"], i["knowable"], i["where"]) for i in upgraded] == [("host", None, ""), ("start-up", None, "")]


def test_runner_rejects_invalid_rank_records(tmp_path: Path) -> None:
    (tmp_path / "rank-0.json").write_text(json.dumps(make_rank_record(0)))
    (tmp_path / "rank-1.json").write_text(json.dumps({**make_rank_record(1), "timed_steps": "many"}))
    records, problems = read_rank_records(tmp_path)
    assert [r["rank"] for r in records] == [0]
    assert len(problems) == 1 and problems[0].startswith("rank-1.json: timed_steps")
    cfg = DdpbenchConfig(cluster=ClusterConfig(name="c", nnodes=1, nproc_per_node=2))
    cfg.deciding(decide(cfg))
    nodes = {0: trial_record.node_entry(0, "h", wall_s=1.0, exit_code=0, spawn_epoch=0.0, exit_epoch=1.0)}
    status, error = classify("exited", 60.0, nodes, records, cfg, problems)
    assert status == "failed" and "invalid rank record rank-1.json" in str(error)
    assert classify("exited", 60.0, nodes, [make_rank_record(0), make_rank_record(1)], cfg) == ("ok", None)


def test_analysis_record_round_trip(tmp_path: Path) -> None:
    make_sweep(tmp_path / "s", ("native", "traceml"), 3)
    payload = analysis_to_dict(analyze(collect_trials([tmp_path / "s"]).frame))
    assert (payload["schema"], payload["schema_version"]) == (analysis_record.SCHEMA, analysis_record.SCHEMA_VERSION)
    assert analysis_record.validate_analysis_record(payload) is None
    path = tmp_path / analysis_record.ANALYSIS_FILE
    path.write_text(json.dumps(payload))
    record, reason = analysis_record.read_analysis_record(path)
    assert reason is None and record is not None and record["comparisons"][0]["mode"] == "traceml"
    path.write_text(json.dumps({**payload, "schema_version": 99}))
    assert "unknown schema_version" in str(analysis_record.read_analysis_record(path)[1])
    path.write_text(json.dumps({k: v for k, v in payload.items() if k != "comparisons"}))
    assert analysis_record.read_analysis_record(path)[1] == "partial record: missing comparisons"

