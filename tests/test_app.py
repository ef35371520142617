"""End-to-end tests of the Hydra app with the real torchrun and the real `traceml run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpbench_cli import assert_nothing_left, only_sweep_dir, run_ddpbench, trials_in

FAST = ["model=tiny", "stop.steps=30", "stop.warmup_steps=3"]


@pytest.mark.slow
def test_paired_sweep_native_traceml_two_repeats(tmp_path: Path) -> None:
    run = run_ddpbench(["-m", "mode=native,traceml", "repeat=1-2", *FAST], tmp_path)
    assert run.returncode == 0, run.output
    sweep = only_sweep_dir(tmp_path)
    trials = trials_in(sweep)
    assert [(t["mode"], t["repeat"], t["pair_position"]) for t in trials] == [
        ("native", 1, 0), ("traceml", 1, 1), ("traceml", 2, 0), ("native", 2, 1),
    ]
    assert all(t["status"] == "ok" for t in trials), [t["error"] for t in trials]
    assert {t["steps"] for t in trials} == {30}
    for t in trials:
        assert [r["steps"] for r in t["ranks"]] == [30, 30]
        parts = t["startup_s"] + t["train_s"] + t["teardown_s"]
        assert parts == pytest.approx(t["wall_s"], abs=1e-6)
        assert t["startup_s"] > 0 and t["train_s"] > 0 and t["teardown_s"] > 0
    traced = [t for t in trials if t["mode"] == "traceml"]
    for t in traced:
        assert t["traceml"] and Path(t["traceml"]["summary_path"]).is_file()
        assert t["traceml"]["steps_analyzed"] == 30 + 3  # warmup steps run inside trace_step too
    assert (sweep / "report.md").stat().st_size > 0
    plots = sorted((sweep / "plots").glob("*.png"))
    assert {p.name.split("-", 1)[1] for p in plots} == {
        "slope-traceml.png", "step-time.png", "wall-decomposition.png", "throughput.png"}
    assert all(p.stat().st_size > 1000 for p in plots)
    report = (sweep / "report.md").read_text()
    assert all(f"plots/{p.name}" in report for p in plots)
    assert "[1/4] start" in run.stdout and "[4/4] ok" in run.stdout
    assert_nothing_left(str(tmp_path))


@pytest.mark.slow
def test_local_2node_gives_world_size_four_across_two_node_ranks(tmp_path: Path) -> None:
    run = run_ddpbench(["cluster=local_2node", *FAST], tmp_path)
    assert run.returncode == 0, run.output
    trial = json.loads(next((tmp_path / "outputs" / "runs").glob("*/trial.json")).read_text())
    assert trial["status"] == "ok", trial["error"]
    assert trial["world_size"] == 4 and trial["nnodes"] == 2
    assert sorted({r["node_rank"] for r in trial["ranks"]}) == [0, 1]
    assert [n["node_rank"] for n in trial["nodes"]] == [0, 1]
    assert "status=ok" in run.stdout
    assert_nothing_left(str(tmp_path))


def test_installed_configs_work_from_any_directory(tmp_path: Path) -> None:
    run = run_ddpbench(["--cfg", "job", "model=seed_e2e"], tmp_path, timeout=60)
    assert run.returncode == 0, run.output
    assert "hidden_dim: 4096" in run.stdout
    assert "name: local_cpu" in run.stdout


def test_user_mode_from_config_dir(tmp_path: Path) -> None:
    user_conf = tmp_path / "myconf" / "mode"
    user_conf.mkdir(parents=True)
    (user_conf / "mytool.yaml").write_text(
        "defaults:\n  - native\n  - _self_\nname: mytool\ndescription: native with an env var\n"
        "env:\n  MYTOOL_ON: '1'\n"
    )
    run = run_ddpbench(["--config-dir", str(tmp_path / "myconf"), "--cfg", "job", "mode=mytool"], tmp_path, timeout=60)
    assert run.returncode == 0, run.output
    assert "name: mytool" in run.stdout and "MYTOOL_ON" in run.stdout
