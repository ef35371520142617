"""The user's own training script: ``workload=script``, figures from rank 0's output, the recorder.

The script is tests/scripts/ddp_user_script.py, a tiny 2-rank gloo DDP job with flags of its own,
copied into each test's folder and named by a relative path, run by the real ddpbench command under
real torchrun and real ``traceml run``. The config rules run in-process. About 80 s on 2 cores.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from hydra import compose, initialize_config_module

from ddpbench.config import typed_trial
from ddpbench.trial.checks import check_trial_config
from ddpbench.formats.condition import job_dirname
from ddpbench.config.decided import script_args
from ddpbench.errors import ConfigError
from ddpbench.formats.rank_record import validate_rank_record
from ddpbench.formats.trial_record import validate_trial_record
from ddpbench.trial.command import node_environment, make_context, workload_args
from ddpbench.trial.outcome import last_matches
from ddpbench.workload.recorder import (ENV_METRICS_DIR, ENV_SAVE_STEP_TIMES, ENV_STOP_DURATION_S,
                                       ENV_STOP_STEPS, ENV_WARMUP_STEPS)
from helpers.cli import ONE_RANK, CliRun, only_sweep_dir, run_ddpbench, trials_in
from helpers.processes import child_env, free_port

SCRIPT = Path(__file__).parent / "scripts" / "ddp_user_script.py"
STEPS_PATTERN = 'workload.metrics.steps_per_s="steps_per_s=([0-9.]+)"'


@pytest.fixture()
def user_dir(tmp_path: Path) -> Path:
    """A folder holding the user's script at ``train/ddp_user_script.py`` (run from there by relative path)."""
    (tmp_path / "train").mkdir()
    shutil.copy(SCRIPT, tmp_path / "train" / SCRIPT.name)
    return tmp_path


def script_run(cwd: Path, *extra: str, multirun: bool = False) -> CliRun:
    args = ["-m"] if multirun else []
    return run_ddpbench([*args, "workload=script", f"workload.path=train/{SCRIPT.name}", *extra], cwd, timeout=240)


def single_trial(cwd: Path) -> Dict[str, Any]:
    [path] = (cwd / "outputs" / "runs").glob("*/trial.json")
    return json.loads(path.read_text())


def error_lines(run: CliRun) -> List[str]:
    return [line for line in run.stderr.splitlines() if line.startswith(("ddpbench: error:", "error:"))]


# --- pure parts ---


def test_last_match_wins_and_no_match_is_none() -> None:
    lines = ["steps_per_s=1.5", "noise", "steps_per_s=2.25 loss=0.3", "tokens/s 99"]
    found = last_matches(lines, {"steps_per_s": r"steps_per_s=([0-9.]+)", "x": r"x=(\d+)", "tok": r"tokens/s (\d+)"})
    assert found == {"steps_per_s": "2.25", "x": None, "tok": "99"}


def test_script_args_take_a_list_or_one_shell_string() -> None:
    assert script_args(["--lr=1e-3", "--name=a b"]) == ("--lr=1e-3", "--name=a b")
    assert script_args("--lr=1e-3 --name 'a b' --steps 3") == ("--lr=1e-3", "--name", "a b", "--steps", "3")
    with pytest.raises(ConfigError, match="cannot be split as a shell would"):
        script_args("--name 'a b")


def test_job_dirname_is_one_path_component() -> None:
    assert job_dirname("mode=native,workload.path=a/b.py") == "mode=native,workload.path=a%2Fb.py"
    long = job_dirname("workload.args=" + "x" * 400)
    assert len(long.encode()) <= 200 and "/" not in long
    assert long != job_dirname("workload.args=" + "x" * 399 + "y")


@pytest.fixture(scope="module")
def compose_cfg() -> Iterator[Any]:
    import ddpbench.app  # noqa: F401  (registers the configs as the app does)

    with initialize_config_module(config_module="ddpbench.conf", version_base="1.3"):
        yield lambda overrides: typed_trial(compose(config_name="config", overrides=["sweep_name=t", *overrides]))


def test_script_gets_its_own_path_args_and_recorder_environment(compose_cfg: Any) -> None:
    cfg = compose_cfg(["workload=script", f"workload.path={SCRIPT}", 'workload.args="--steps 3 --width=8"',
                       "workload.records=true", "stop=duration", "stop.duration_sec=2"])
    arm = check_trial_config(cfg)
    context = make_context(cfg, arm, node_rank=0, master_addr="127.0.0.1", master_port=1, aggregator_port=2,
                           run_name="r", job_dir=Path("/tmp/job"))
    assert context.script == str(SCRIPT.resolve())
    assert workload_args(cfg, context.metrics_dir) == ["--steps", "3", "--width=8"]
    env = node_environment(cfg, arm, context, base={ENV_STOP_DURATION_S: "99"})
    assert env[ENV_METRICS_DIR] == "/tmp/job/metrics" and env[ENV_STOP_DURATION_S] == "2.0"
    plain = compose_cfg(["workload=script", f"workload.path={SCRIPT}"])
    env = node_environment(plain, arm, context, base={ENV_METRICS_DIR: "/elsewhere"})
    assert ENV_METRICS_DIR not in env  # no recorder asked: an outer run's setting does not leak in


@pytest.mark.parametrize("overrides, message", [
    (["workload=script"], "workload.path=None: workload=script needs workload.path=PATH"),
    ([f"workload.path={SCRIPT}", 'workload.metrics.a="a=[0-9]+"'], "workload.metrics.a='a=[0-9]+': must have exactly one capture group (it has 0)"),
    ([f"workload.path={SCRIPT}", 'workload.metrics.a="(a)=([0-9]+)"'], "must have exactly one capture group (it has 2)"),
    ([f"workload.path={SCRIPT}", 'workload.metrics.a="a=([0-9]+"'], "workload.metrics.a='a=([0-9]+': is not a valid regular expression"),
    ([f"workload.path={SCRIPT}", "workload.units.a=s"], "workload.units.a='s': names no figure in workload.metrics"),
    ([f"workload.path={SCRIPT}", "fault.crash_at_step=2"], "workload=script with fault.crash_at_step=2: fault injection"),
    ([f"workload.path={SCRIPT}", "mode=inject"], "workload=script with mode=inject: the mode adds ddpbench's own"),
    ([f"workload.path={SCRIPT}", "stop=duration"], "workload=script with stop=duration: the lockstep duration stop needs"),
    ([f"workload.path={SCRIPT}", "timing=phase"], "workload=script with timing='phase'"),
    (["workload=mlp", "workload.args=[--x]"], "workload.args=['--x']: only applies with workload=script"),
])
def test_what_a_script_cannot_do_is_refused_in_one_line(compose_cfg: Any, overrides: List[str], message: str) -> None:
    if overrides[0].startswith("workload.path"):
        overrides = ["workload=script", *overrides]
    with pytest.raises(ConfigError) as caught:
        check_trial_config(compose_cfg(overrides))
    assert message in str(caught.value) and "\n" not in str(caught.value)


RECORDER_STEPS_SCRIPT = """
import os, sys, time
import torch.distributed as dist
from ddpbench.workload.recorder import Recorder
dist.init_process_group("gloo")
recorder = Recorder(batch_size=4)
n = 0
while not recorder.should_stop():
    with recorder.step():
        time.sleep(0.002)
    n += 1
recorder.finish(loss=0.5)
print(n)
"""


def test_recorder_step_blocks_warmup_and_the_steps_stop(tmp_path: Path) -> None:
    """One rank (no torchrun): ``with step()``, 2 warmup steps, stop=steps 5 -> 7 steps run, 5 timed."""
    import subprocess
    import sys

    env = {**child_env(), "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), ENV_METRICS_DIR: str(tmp_path), ENV_WARMUP_STEPS: "2",
           ENV_STOP_STEPS: "5", ENV_SAVE_STEP_TIMES: "1"}
    done = subprocess.run([sys.executable, "-c", RECORDER_STEPS_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "7"
    record = json.loads((tmp_path / "rank-0.json").read_text())
    assert validate_rank_record(record) == []
    assert record["timed_steps"] == 5 and record["warmup_steps"] == 2 and record["final_loss"] == 0.5
    assert record["samples"] == 20 and record["workload"] == "script" and record["stop_reason"] == "steps"
    assert all(ms >= 2.0 for ms in record["step_times_ms"])


# --- real runs ---


@pytest.mark.slow
def test_native_vs_traceml_figures_from_the_scripts_output(user_dir: Path) -> None:
    run = script_run(user_dir, "mode=native,traceml", 'workload.args="--steps=12 --width 16"', STEPS_PATTERN,
                     "workload.units.steps_per_s=steps/s", ONE_RANK, multirun=True)
    assert run.returncode == 0, run.output
    sweep = only_sweep_dir(user_dir)
    trials = trials_in(sweep)
    assert [t["mode"] for t in trials] == ["native", "traceml"]
    for trial in trials:
        assert trial["status"] == "ok", trial["error"]
        assert validate_trial_record(trial) is None
        figure = trial["metrics"]["steps_per_s"]
        assert figure["value"] > 0 and figure["unit"] == "steps/s" and figure["source"] == "steps_per_s=([0-9.]+)"
        assert trial["wall_s"] > 0
        # no record: what cannot be known is unknown, never zero
        assert trial["startup_s"] is None and trial["train_s"] is None and trial["teardown_s"] is None
        assert trial["steps_per_s"] is None and trial["step_time_ms"] is None
        assert "done: steps=12 " in Path(trial["logs"]["stdout"][0]).read_text()  # the script's own flags arrived
    assert trials[1]["traceml"]["summary_path"] and Path(trials[1]["traceml"]["summary_path"]).is_file()
    # the job dirs hold the path's '/' as %2F: each is one level below the sweep dir, where the collector looks
    assert all(Path(t["job_dir"]).parent == sweep.resolve() and "train%2F" in t["job_dir"] for t in trials)


@pytest.mark.slow
def test_a_pattern_that_matches_nothing_fails_the_trial(user_dir: Path) -> None:
    run = script_run(user_dir, 'workload.args=["--steps=5"]', STEPS_PATTERN, 'workload.metrics.tokens="tokens=([0-9]+)"',
                     ONE_RANK)
    assert run.returncode == 1, run.output
    trial = single_trial(user_dir)
    assert trial["status"] == "failed"
    assert trial["error"].startswith("workload.metrics.tokens: pattern 'tokens=([0-9]+)' matched nothing in rank 0's output")
    assert trial["metrics"]["tokens"]["value"] is None and trial["metrics"]["steps_per_s"]["value"] > 0
    assert error_lines(run) == [f"error: {trial['error']}"]


@pytest.mark.parametrize("pattern, groups", [("steps_per_s=[0-9.]+", 0), ("(steps)_per_s=([0-9.]+)", 2)])
def test_a_pattern_without_one_group_is_refused_before_anything_runs(user_dir: Path, pattern: str, groups: int) -> None:
    run = script_run(user_dir, f'workload.metrics.steps_per_s="{pattern}"')
    assert run.returncode == 2, run.output
    assert error_lines(run) == [f"ddpbench: error: workload.metrics.steps_per_s={pattern!r}: must have exactly one "
                                f"capture group (it has {groups}); use (?:...) for other groups"]
    assert not (user_dir / "outputs").exists()


def test_a_missing_script_is_one_line_before_anything_runs(user_dir: Path) -> None:
    run = run_ddpbench(["-m", "mode=native,traceml", "workload=script", "workload.path=train/nope.py"], user_dir)
    assert run.returncode == 2, run.output
    assert error_lines(run) == [f"ddpbench: error: workload.path='train/nope.py': no such file: "
                                f"{(user_dir / 'train' / 'nope.py').resolve()}"]
    assert not (user_dir / "outputs" / "multirun").exists() or not any((user_dir / "outputs" / "multirun").rglob("*.json"))


@pytest.mark.slow
def test_the_recorder_gives_step_figures_decomposition_and_the_lockstep_stop(user_dir: Path) -> None:
    run = script_run(user_dir, 'workload.args=["--steps=1000000","--recorder"]', "workload.records=true", "stop=duration",
                     "stop.duration_sec=1", "stop.check_every=7", "stop.warmup_steps=3", STEPS_PATTERN)
    assert run.returncode == 0, run.output
    trial = single_trial(user_dir)
    assert trial["status"] == "ok", trial["error"]
    assert trial["steps"] % 7 == 0 and trial["warmup_steps"] == 3  # both ranks left after the same check step
    assert set(trial["step_time_ms"]) >= {"mean", "median", "p90"} and trial["step_time_ms"]["median"] > 0
    parts = [trial[k] for k in ("startup_s", "train_s", "teardown_s")]
    # the trial's train_s runs from the LATEST rank's first timed step, so it may fall short of the duration by the
    # ranks' start skew; the rank whose clock stopped the loop trained at least stop.duration_sec (checked below)
    assert all(p is not None and p >= 0 for p in parts) and trial["train_s"] >= 0.9
    assert sum(parts) == pytest.approx(trial["wall_s"])
    assert trial["workload"] == SCRIPT.name and trial["metrics"]["steps_per_s"]["value"] > 0
    rank_train_s = []
    for rank in (0, 1):
        record = json.loads((Path(trial["attempt"]["dir"]) / "metrics" / f"rank-{rank}.json").read_text())
        rank_train_s.append(record["train_s"])
        assert validate_rank_record(record) == []
        assert record["data"]["loader"] == "own" and record["stop_reason"] == "duration"
        assert len(record["step_times_ms"]) == trial["steps"]
    assert max(rank_train_s) >= 1.0 - 1e-3  # epoch vs perf_counter clocks: a microsecond apart at most


@pytest.mark.slow
def test_a_script_that_crashes_is_a_failed_trial_with_its_error_line(user_dir: Path) -> None:
    run = script_run(user_dir, 'workload.args=["--steps=20","--crash-at-step=3"]', STEPS_PATTERN, ONE_RANK)
    assert run.returncode == 1, run.output
    trial = single_trial(user_dir)
    assert trial["status"] == "failed" and trial["exit_code"] not in (0, None)
    assert "RuntimeError: user script crashed at step 3" in trial["error"], trial["error"]
