"""workload=ray_train: a built-in model trained by Ray Train's TorchTrainer (native) and TraceML's
TraceMLTorchTrainer (traceml), on the real local Ray cluster the test session starts once (helpers.ray_cluster).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from helpers.cli import assert_nothing_left, run_ddpbench, trials_in
from helpers.ray_cluster import RayCluster  # the session fixture ray_cluster: tests/conftest.py

STEPS = 20
RAY_TRAIN = ["workload=ray_train", "model=tiny", f"stop.steps={STEPS}", "stop.warmup_steps=3", "cluster=ray_cpu"]


@pytest.fixture(scope="module")
def ray_train_sweep(ray_cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """One native (TorchTrainer) / traceml (TraceMLTorchTrainer) pair, 2 Ray Train workers; shared by the asserts."""
    cwd = tmp_path_factory.mktemp("ray-train")
    name = f"raytrain-{uuid.uuid4().hex[:8]}"
    run = run_ddpbench(["-m", "mode=native,traceml", "repeat=1", *RAY_TRAIN, f"sweep_name={name}"], cwd, timeout=300)
    sweep = cwd / "outputs" / "multirun" / name
    yield {"run": run, "name": name, "sweep": sweep, "trials": {t["mode"]: t for t in trials_in(sweep)}}


@pytest.mark.slow
def test_ray_train_sweep_native_vs_traceml_trainer(ray_train_sweep: Dict[str, Any]) -> None:
    run, trials = ray_train_sweep["run"], ray_train_sweep["trials"]
    assert run.returncode == 0, run.output
    assert sorted(trials) == ["native", "traceml"], run.output
    for mode, t in trials.items():
        assert t["status"] == "ok", (mode, t["error"], run.output)
        assert t["workload"] == "mlp" and t["world_size"] == 2
        assert sorted(r["rank"] for r in t["ranks"]) == [0, 1]
        assert [r["steps"] for r in t["ranks"]] == [STEPS, STEPS], t["ranks"]  # warm-up excluded
        assert t["step_time_ms"]["median"] > 0 and t["steps_per_s"] > 0
        # Ray's own start-up is shown apart, and is part of the start-up figure
        assert 0 < t["ray_startup_s"] < t["startup_s"] < t["wall_s"], t
    assert trials["native"]["steps"] == trials["traceml"]["steps"] == STEPS
    assert trials["native"]["traceml"] is None
    summary = trials["traceml"]["traceml"]  # TraceML's own summary: its runtime ran in the Ray Train workers
    assert summary and summary["steps_analyzed"], summary
    report = (ray_train_sweep["sweep"] / "report.md").read_text()
    assert "Ray start-up" in report and "native " in report.split("Ray start-up", 1)[1].splitlines()[0], report


@pytest.mark.slow
def test_ray_train_rank_records_come_from_ray_train_workers(ray_train_sweep: Dict[str, Any]) -> None:
    import json

    native = ray_train_sweep["trials"]["native"]
    records = sorted(Path(native["attempt"]["dir"], "metrics").glob("rank-*.json"))
    assert len(records) == 2
    for path in records:
        record = json.loads(path.read_text())
        assert record["traceml"]["active"] is False and record["ray_startup_s"] > 0
    traceml = ray_train_sweep["trials"]["traceml"]
    for path in Path(traceml["attempt"]["dir"], "metrics").glob("rank-*.json"):
        assert json.loads(path.read_text())["traceml"] == {"active": True, "mode": "auto"}
    assert_nothing_left(ray_train_sweep["name"])


def test_modes_without_a_ray_trainer_are_refused_in_one_line(tmp_path: Path) -> None:
    for mode, words in (("pyspy", "mode=pyspy: cannot run workload=ray_train"),
                        ("traceml_disabled", "mode=traceml_disabled: cannot run workload=ray_train")):
        run = run_ddpbench(["-m", f"mode=native,{mode}", "repeat=1", "workload=ray_train", "model=tiny"], tmp_path,
                           timeout=60)
        assert run.returncode == 2, (mode, run.output)
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and words in lines[0], (mode, run.output)
    run = run_ddpbench(["-m", "mode=native", "repeat=1", "workload=ray_train", "cluster=local_2node"], tmp_path,
                       timeout=60)
    assert run.returncode == 2 and "a local Ray instance is one node" in run.stderr, run.output
    assert not list(tmp_path.glob("outputs/multirun/*/*/trial.json"))


def test_missing_ray_is_one_line_before_any_trial(tmp_path: Path) -> None:
    hide = tmp_path / "hide_ray"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['ray'] = None  # this Python has no Ray\n")
    run = run_ddpbench(["-m", "mode=native,traceml", "repeat=1", "workload=ray_train", "model=tiny"], tmp_path,
                       timeout=60, env={"PYTHONPATH": str(hide)})
    assert run.returncode == 2, run.output
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "workload=ray_train needs Ray Train" in lines[0], run.output
    assert not list(tmp_path.glob("outputs/multirun/*/*/trial.json"))


def test_config_differences_show_the_trainer_only_for_ray_train() -> None:
    import json

    import pandas as pd

    from ddpbench.analysis.provenance import config_differences

    def frame(trains: Any) -> "pd.DataFrame":
        return pd.DataFrame([{"mode": mode, "status": "ok", "config_json": json.dumps(
            {"workload": {"trains": trains}, "mode": {"name": mode, "ray_trainer": {"_target_": target}}})}
            for mode, target in (("native", "ray.train.torch.TorchTrainer"), ("traceml", "t.TraceMLTorchTrainer"))])

    assert [key for key, _ in config_differences(frame(None), "native")[1]] == ["mode.name"]
    assert [key for key, _ in config_differences(frame("mlp"), "native")[1]] == ["mode.name", "mode.ray_trainer._target_"]


def test_a_trial_record_before_ray_train_reads_with_ray_startup_null(tmp_path: Path) -> None:
    import json

    from ddpbench.formats.trial_record import read_trial_record

    path = tmp_path / "trial.json"
    path.write_text(json.dumps({"schema": "ddpbench.trial", "schema_version": 3, "sweep_dir": "s", "mode": "native",
                                "repeat": 1, "pair_position": 0, "condition": {}, "condition_id": "",
                                "status": "failed"}))
    record, problem = read_trial_record(path)
    assert problem is None and record is not None and record["ray_startup_s"] is None
