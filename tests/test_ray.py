"""Ray, on a real 2-node Ray cluster (scripts/ray-local.sh) that this module starts once and stops when its last
test ends.

- ``cluster.kind=ray``: each node of a trial is a Ray actor in a placement group (STRICT_SPREAD); node rank r
  is pinned to the cluster's node r through its custom resource ``node<r>``, so the world of 4 ranks really
  spans both raylets.
- ``workload=ray_train``: a built-in model trained by Ray Train's TorchTrainer (native) and TraceML's
  TraceMLTorchTrainer (traceml).
"""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from helpers.cli import assert_nothing_left, run_ddpbench, start_ddpbench, trials_in, wait_or_kill
from helpers.processes import wait_for
from helpers.ray_cluster import RayCluster, ray_cluster  # noqa: F401  (the module's cluster)

FAST = ["model=tiny", "stop.steps=30", "stop.warmup_steps=3"]
RAY_2NODE = ["cluster=ray_cpu_2node", "cluster.nproc_per_node=2", "cluster.ray.node_resources=[{node0:1},{node1:1}]"]
#: the placement bound of a test whose trial's placement group can never fit (seconds)
NEVER_FITS_S = 20


@pytest.fixture(scope="module")
def paired_sweep(ray_cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """One native/traceml pair on both Ray nodes, world size 4; shared by the asserts below."""
    cwd = tmp_path_factory.mktemp("ray-sweep")
    name = f"ray-{uuid.uuid4().hex[:8]}"
    run = run_ddpbench(["-m", "mode=native,traceml", "repeat=1", *FAST, *RAY_2NODE, f"sweep_name={name}"], cwd,
                       timeout=240)
    sweep = cwd / "outputs" / "multirun" / name
    yield {"run": run, "name": name, "sweep": sweep, "trials": trials_in(sweep)}


@pytest.mark.slow
def test_paired_sweep_spans_both_ray_nodes(paired_sweep: Dict[str, Any]) -> None:
    run, trials = paired_sweep["run"], paired_sweep["trials"]
    assert run.returncode == 0, run.output
    assert sorted(t["mode"] for t in trials) == ["native", "traceml"], run.output
    for t in trials:
        assert t["status"] == "ok", (t["error"], run.output)
        assert t["world_size"] == 4
        assert [n["node_rank"] for n in t["nodes"]] == [0, 1]
        assert all(n["exit_code"] == 0 and n["wall_s"] > 0 for n in t["nodes"])
        assert sorted((r["rank"], r["node_rank"]) for r in t["ranks"]) == [(0, 0), (1, 0), (2, 1), (3, 1)]
    traceml = next(t for t in trials if t["mode"] == "traceml")
    assert traceml["traceml"] and traceml["traceml"]["steps_analyzed"], traceml["traceml"]
    assert (paired_sweep["sweep"] / "report.md").is_file()


@pytest.mark.slow
def test_paired_sweep_leaves_no_process_or_placement_group(paired_sweep: Dict[str, Any], ray_cluster: RayCluster
                                                           ) -> None:
    assert_nothing_left(paired_sweep["name"])
    groups = _ddpbench_groups(ray_cluster.address)
    assert groups and all(g["state"] == "REMOVED" for g in groups), groups


def _start_sweep_hung_on_node_1(tmp_path: Path, repeat: str) -> Tuple[str, subprocess.Popen, Path, Path]:
    """A sweep of native trials on both Ray nodes whose rank 2 (node 1) hangs at timed step 5 of every trial, the
    others waiting for it in the all-reduce: (sweep name, driver, its log, sweep dir) once node 1 says it hangs."""
    name = f"ray-{uuid.uuid4().hex[:8]}"
    args = ["-m", "mode=native", f"repeat={repeat}", *FAST, *RAY_2NODE, f"cluster.ray.placement_timeout_s={NEVER_FITS_S}",
            "fault.hang_at_step=5", "fault.rank=2",
            "trial.collective_timeout_s=60", "trial.timeout_s=120", f"sweep_name={name}"]
    log = tmp_path / "driver.log"
    driver = start_ddpbench(args, tmp_path, log=log)
    sweep = tmp_path / "outputs" / "multirun" / name
    try:
        wait_for(lambda: any("fault: hang" in p.read_text(errors="replace")
                             for p in sweep.glob("*/attempts/*/logs/node1.stderr.log")),
                 90, "rank 2's hang in node 1's log", alive=[driver], details=lambda: log.read_text(errors="replace"))
    except BaseException:
        driver.kill()
        driver.wait()
        raise
    return name, driver, log, sweep


@pytest.mark.slow
def test_node_stopped_mid_trial_fails_it_and_the_sweep_goes_on(ray_cluster: RayCluster, tmp_path: Path) -> None:
    name, driver, log, sweep = _start_sweep_hung_on_node_1(tmp_path, "1-2")
    try:
        stopped = ray_cluster.script("stop-node", "1")
        assert stopped.returncode == 0, stopped.stderr
        stopped_at = time.monotonic()
        code = wait_or_kill(driver, 90)
        finished_after = time.monotonic() - stopped_at
    finally:
        if driver.poll() is None:
            driver.send_signal(signal.SIGKILL)
        restarted = ray_cluster.script("start-node", "1", timeout=150)
    output = log.read_text()
    assert code == 1, output
    trials = trials_in(sweep)
    assert [t["repeat"] for t in trials] == [1, 2] and [t["status"] for t in trials] == ["failed", "failed"], output
    assert "Ray actor died" in trials[0]["error"], trials[0]["error"]
    # the sweep went on: with one node left the next trial's placement group never fits, within its bound
    assert "no Ray nodes offer" in trials[1]["error"], trials[1]["error"]
    assert finished_after < 10 + NEVER_FITS_S + 30, finished_after
    assert "[2/2]" in output
    assert_nothing_left(name)
    assert restarted.returncode == 0, restarted.stderr


@pytest.mark.slow
def test_a_placement_that_times_out_fails_the_trial_and_leaves_no_placement_group(ray_cluster: RayCluster,
                                                                                   tmp_path: Path) -> None:
    name = f"ray-{uuid.uuid4().hex[:8]}"
    run = run_ddpbench(["-m", "mode=native", "repeat=1", *FAST, "cluster=ray_cpu", "cluster.nproc_per_node=1",
                        "cluster.ray.node_resources=[{no_such_node:1}]", "cluster.ray.placement_timeout_s=3",
                        f"sweep_name={name}"], tmp_path, timeout=120)
    assert run.returncode == 1, run.output
    [trial] = trials_in(tmp_path / "outputs" / "multirun" / name)
    assert trial["status"] == "failed" and "no Ray nodes offer" in trial["error"], trial["error"]
    groups = _ddpbench_groups(ray_cluster.address)
    assert groups and all(g["state"] == "REMOVED" for g in groups), groups
    assert_nothing_left(name)


def test_ray_address_that_does_not_answer_stops_before_any_trial(tmp_path: Path) -> None:
    run = run_ddpbench(["-m", "mode=native,traceml", "repeat=1", *FAST, "cluster=ray_cpu_2node",
                        "cluster.ray.address=127.0.0.1:9", "cluster.ray.connect_timeout_s=3"], tmp_path, timeout=60)
    assert run.returncode == 2, run.output
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "127.0.0.1:9 does not answer" in lines[0], run.output
    assert not list(tmp_path.glob("outputs/multirun/*/*/trial.json"))


def test_ray_config_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    for override, words in (("cluster.shared_dir=false", "must share it"),
                            ("cluster.ray.node_resources=[{node0:x}]", "must be a number"),
                            ("cluster.ray.address=ray://h:10001", "Ray Client addresses"),
                            ("cluster.ray.address=nohostport", "must be HOST:PORT")):
        run = run_ddpbench(["-m", "mode=native", "repeat=1", "model=tiny", "cluster=ray_cpu_2node", override],
                           tmp_path, timeout=60)
        assert run.returncode == 2, (override, run.output)
        assert words in run.stderr and len(run.stderr.strip().splitlines()) == 1, (override, run.output)


def _ddpbench_groups(address: str) -> List[Dict[str, Any]]:
    import ray
    from ray.util.placement_group import placement_group_table

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        return [g for g in placement_group_table().values() if str(g.get("name", "")).startswith("ddpbench-")]
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_sigterm_mid_trial_leaves_no_process_and_no_placement_group(ray_cluster: RayCluster, tmp_path: Path) -> None:
    name, driver, log, _ = _start_sweep_hung_on_node_1(tmp_path, "1")
    try:
        driver.send_signal(signal.SIGTERM)
        code = wait_or_kill(driver, 60)
    finally:
        if driver.poll() is None:
            driver.send_signal(signal.SIGKILL)
    assert code != 0, log.read_text()
    assert_nothing_left(name, grace_s=15.0)  # the ranks on both Ray nodes too: they name the sweep dir
    wait_for(lambda: all(g["state"] == "REMOVED" for g in _ddpbench_groups(ray_cluster.address)), 30,
             "every ddpbench placement group removed")


# --------------------------------------------------------------------------- Ray Train

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


def test_no_ray_address_names_the_command_that_sets_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ddpbench.cluster.ray import backend as ray_backend
    from ddpbench.errors import ConfigError

    monkeypatch.setattr(ray_backend, "RAY_CURRENT_CLUSTER", tmp_path / "none")
    with pytest.raises(ConfigError) as caught:
        ray_backend.resolve_address("auto", env={})
    assert 'eval "$(scripts/ray-local.sh start)"' in str(caught.value)
    assert "\n" not in str(caught.value)
