"""Reliability with real processes: crashes, hangs, resume, SIGKILL and Ctrl-C of the driver,
the rank-divergent stop, and two sweeps at once. After each, no process of the trial is left."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers.cli import assert_nothing_left, cli_env, ONE_RANK, only_sweep_dir, pinned, run_ddpbench, trials_in
from helpers.processes import wait_for_file, wait_for_text

pytestmark = pytest.mark.slow
FAST = ["model=tiny", "stop.steps=30", "stop.warmup_steps=3", "trial.collective_timeout_s=10"]
#: a trial that trains 2 s and says when its timed loop runs: a signal after its first progress line lands mid-trial
TRAINING = ["model=tiny", "stop=duration", "stop.duration_sec=2", "stop.warmup_steps=3", "trial.log_every=10",
            "trial.collective_timeout_s=10"]


def test_crashing_rank_is_recorded_failed_and_the_sweep_goes_on(tmp_path: Path) -> None:
    run = run_ddpbench(["-m", "mode=native,traceml", "repeat=1", *FAST, "fault.crash_at_step=5", "fault.rank=1"],
                       tmp_path)
    assert run.returncode != 0
    trials = trials_in(only_sweep_dir(tmp_path))
    assert [t["mode"] for t in trials] == ["native", "traceml"]
    for trial in trials:
        assert trial["status"] == "failed", trial
        assert trial["exit_code"] not in (0, None)
        assert trial["error"] and trial["logs"]["tail"] is not None
        assert trial["steps_per_s"] is None
    assert "[2/2] failed" in run.stdout
    report = (only_sweep_dir(tmp_path) / "report.md").read_text()
    assert "failed" in report
    assert_nothing_left(str(tmp_path))


@pytest.mark.parametrize("mode", ["native", "traceml"])
def test_hung_trial_is_killed_within_timeout_plus_ten_seconds(tmp_path: Path, mode: str) -> None:
    run = run_ddpbench([f"mode={mode}", *FAST, "fault.hang_at_step=3", "trial.collective_timeout_s=600",
                        "trial.timeout_s=6"], tmp_path, timeout=180)
    assert run.returncode != 0
    trial = json.loads(next((tmp_path / "outputs" / "runs").glob("*/trial.json")).read_text())
    assert trial["status"] == "timeout" and trial["exit_code"] is None
    assert trial["wall_s"] < 6 + 10  # spawn to exit, on the driver's monotonic clock
    assert_nothing_left(str(tmp_path), grace_s=0.5)


def test_resume_skips_finished_trials_and_keeps_earlier_attempts(tmp_path: Path) -> None:
    args = ["-m", "mode=native", "repeat=1-2", *FAST, ONE_RANK, "sweep_name=resumable"]
    first = run_ddpbench(args, tmp_path)
    assert first.returncode == 0, first.output
    sweep = tmp_path / "outputs" / "multirun" / "resumable"
    one, two = (next(sweep.glob(f"*mode=native,*repeat={r},*")) for r in (1, 2))
    before = {p: p.read_bytes() for p in sweep.glob("*/trial.json")}
    assert len(before) == 2
    (two / "trial.json").write_text(json.dumps({**json.loads(before[two / "trial.json"]), "status": "failed"}))
    second = run_ddpbench(args, tmp_path)
    assert second.returncode == 0, second.output
    assert second.stdout.count("already done; skipped") == 1
    assert (one / "trial.json").read_bytes() == before[one / "trial.json"]
    rerun = json.loads((two / "trial.json").read_text())
    assert rerun["status"] == "ok"
    kept = json.loads((two / "attempts" / "1" / "trial.json").read_text())  # the earlier attempt, in its own folder
    assert kept["status"] == "failed" and rerun["attempt"]["number"] == 2


def _start_driver(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ddpbench", *pinned(args)], cwd=cwd, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("how", ["sigkill", "ctrl-c"])
def test_driver_killed_mid_trial_loses_nothing_and_leaves_no_process(tmp_path: Path, how: str) -> None:
    driver = _start_driver(["-m", "mode=native,traceml", "repeat=1", *TRAINING, ONE_RANK, "sweep_name=killed"],
                           tmp_path)
    sweep = tmp_path / "outputs" / "multirun" / "killed"
    try:
        native_trial = wait_for_file(sweep, "*mode=native,*/trial.json", 120, alive=[driver])
        log = wait_for_file(sweep, "*mode=traceml,*/attempts/1/logs/node0.stdout.log", 60, alive=[driver])
        running = log.parents[3]
        wait_for_text(log, "step=", 120, alive=[driver])  # the traceml trial's timed loop runs
        finished = native_trial.read_bytes()
        driver.send_signal(signal.SIGKILL if how == "sigkill" else signal.SIGINT)
        stdout, stderr = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode != 0
    assert_nothing_left(str(tmp_path), grace_s=10)
    assert native_trial.read_bytes() == finished
    leftovers = [p.name for p in running.iterdir() if p.name.startswith(".trial.json")]
    assert leftovers == []
    if how == "ctrl-c":
        assert "interrupted after 1 of 2 trials" in stderr
        assert (sweep / "report.md").is_file()
        assert not (running / "trial.json").exists() or json.loads((running / "trial.json").read_text())["status"] != "ok"


@pytest.mark.parametrize("mode", ["native", "traceml"])
def test_lockstep_duration_stop_survives_clock_skew(tmp_path: Path, mode: str) -> None:
    run = run_ddpbench([f"mode={mode}", "model=tiny", "stop=duration", "stop.duration_sec=2", "stop.check_every=5",
                        "fault.clock_skew_sec=1.5", "fault.rank=1"], tmp_path)
    assert run.returncode == 0, run.output
    trial = json.loads(next((tmp_path / "outputs" / "runs").glob("*/trial.json")).read_text())
    assert trial["status"] == "ok"
    ranks = [json.loads(p.read_text()) for p in sorted(Path(trial["attempt"]["dir"]).glob("metrics/rank-*.json"))]
    # rank 1's clock runs 1.5 s ahead: the ranks agree at a check, so both stop on the same step, on the clock
    assert [r["rank"] for r in ranks] == [0, 1]
    assert len({r["timed_steps"] for r in ranks}) == 1 and ranks[0]["timed_steps"] % 5 == 0, ranks
    assert {r["stop_reason"] for r in ranks} == {"duration"}
    assert [r["steps"] for r in trial["ranks"]] == [ranks[0]["timed_steps"]] * 2
    assert_nothing_left(str(tmp_path))


def test_unsynchronised_stop_with_skew_ends_failed_or_timeout_never_hangs(tmp_path: Path) -> None:
    run = run_ddpbench(["mode=native", "model=tiny", "stop=duration", "stop.duration_sec=2", "stop.sync=false",
                        "fault.clock_skew_sec=1.5", "fault.rank=1", "trial.collective_timeout_s=4",
                        "trial.timeout_s=30"], tmp_path, timeout=120)
    assert run.returncode != 0
    trial = json.loads(next((tmp_path / "outputs" / "runs").glob("*/trial.json")).read_text())
    assert trial["status"] in ("failed", "timeout")
    assert trial["wall_s"] < 30 + 10  # the trial timeout ended it at the latest
    # rank 1 left on its own clock; rank 0 was left in an all-reduce and never finished its loop
    assert not (Path(trial["attempt"]["dir"]) / "metrics" / "rank-0.json").exists()
    assert_nothing_left(str(tmp_path))


def test_two_sweeps_at_once_both_complete(tmp_path: Path) -> None:
    """Two sweeps started in the same second in one folder: two sweep dirs, no shared port, both finish."""
    args = ["-m", "mode=native", "repeat=1", *FAST, ONE_RANK]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda _: run_ddpbench(args, tmp_path), range(2)))
    assert all(r.returncode == 0 for r in runs), [r.output for r in runs]
    sweeps = [p for p in (tmp_path / "outputs" / "multirun").iterdir() if p.is_dir()]
    assert len(sweeps) == 2
    for sweep in sweeps:
        assert [t["status"] for t in trials_in(sweep)] == ["ok"]
    assert_nothing_left(str(tmp_path))
