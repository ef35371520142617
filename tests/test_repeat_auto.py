"""repeat=auto on real trials: a large known per-step cost is decided in fewer pairs than allowed; a pair
disturbed by a real CPU hog is re-run instead of counted."""

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from ddpbench_cli import run_ddpbench, start_ddpbench, wait_or_kill


@pytest.mark.slow
def test_a_clear_overhead_stops_before_max_pairs(tmp_path: Path) -> None:
    run = run_ddpbench(
        ["-m", "mode=native,inject", "repeat=auto", "model=tiny", "stop.steps=30", "stop.warmup_steps=2",
         "inject.step_ms=15", "inject.startup_s=0", "inject.teardown_s=0", "precision.min_pairs=2",
         "precision.max_pairs=5", "precision.halfwidth_pct=null", "precision.disturbed=count", "baseline=native",
         "sweep_name=auto1"],
        cwd=tmp_path, timeout=600,
    )
    assert run.returncode == 0, run.output
    sweep = tmp_path / "outputs" / "multirun" / "auto1"
    stopping = json.loads((sweep / "stopping.json").read_text())
    assert stopping["schema"] == "ddpbench.stopping" and stopping["rule"]["metric"] == "projected_overhead_pct"
    [condition] = stopping["conditions"]
    assert condition["reason"] == "over", stopping
    assert 2 <= condition["pairs"] < 5, stopping
    comparison = condition["comparisons"]["inject"]
    assert comparison["ci_low"] > 2.0 and comparison["n"] == condition["pairs"]
    trials = sorted(sweep.glob("*/trial.json"))
    assert len(trials) == 2 * condition["pairs"], "the remaining pairs must be skipped"
    assert "stop after" in run.stdout and "up to 10 trials" in run.stdout
    report = (sweep / "report.md").read_text()
    assert "Why the sweep stopped (repeat=auto)" in report and "| over |" in report


@contextmanager
def cpu_hog() -> Iterator[None]:
    """A process outside every trial's tree spinning one CPU until the block ends (then killed and reaped,
    so the CPU it used lands in this process's children time, where the trial's load record finds it)."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        yield
    finally:
        os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()


@pytest.mark.slow
def test_a_pair_disturbed_by_a_cpu_hog_is_re_run_not_counted_and_named(tmp_path: Path) -> None:
    sweep = tmp_path / "outputs" / "multirun" / "hogged"
    args = ["-m", "mode=native,native_aa", "repeat=auto", "model=tiny", "stop.steps=30", "stop.warmup_steps=2",
            "precision.min_pairs=2", "precision.max_pairs=4", "precision.halfwidth_pct=1000000000.0", "sweep_name=hogged"]
    with cpu_hog():  # for the first trial only: pair 1 is disturbed, the later pairs are not
        driver = start_ddpbench(args, tmp_path, log=tmp_path / "driver.log")
        deadline = time.monotonic() + 240
        while not list(sweep.glob("*/trial.json")) and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    exit_code = wait_or_kill(driver, 300)
    log = (tmp_path / "driver.log").read_text()
    assert exit_code == 0, f"exit code {exit_code}\n{log}"
    stopping = json.loads((sweep / "stopping.json").read_text())
    assert stopping["schema_version"] == 2 and stopping["rule"]["disturbed"] == "rerun"
    [condition] = stopping["conditions"]
    excluded = {e["repeat"]: e["why"] for e in condition["excluded"]}
    assert "other processes used" in excluded.get(1, ""), (condition, log)
    # the hogged pair is not counted and later repeats took its place (any other pair this busy machine
    # disturbed is replaced too); the half-width target (any finite interval meets it: 30-step tiny trials
    # vary by tens of points, and the first look has one degree of freedom) stops the sweep at min_pairs counted pairs
    assert 1 not in condition["counted"] and condition["pairs"] == len(excluded) + len(condition["counted"]), condition
    assert condition["reason"] == "precise" and len(condition["counted"]) == 2, condition
    assert condition["comparisons"]["native_aa"]["n"] == 2
    assert len(list(sweep.glob("*/trial.json"))) == 2 * condition["pairs"]
    assert "pair 1 disturbed (native trial: other processes used" in log and "re-run, not counted" in log
    report = (sweep / "report.md").read_text()
    stopping_part = report.split("## Why the sweep stopped", 1)[1].split("\n## ", 1)[0]
    assert f": pair 1 disturbed ({excluded[1]}): re-run, not counted." in stopping_part
    assert f"- Not counted: pair 1 disturbed ({excluded[1]}): re-run, not counted." in report
    # ddpbench-report on the sweep gives the driver's answer: the same pairs left out and counted
    again = subprocess.run([sys.executable, "-m", "ddpbench.report", str(sweep), "--out", str(tmp_path / "again")],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    driver_view, report_view = (json.loads((d / "analysis.json").read_text())["comparisons"]
                                for d in (sweep, tmp_path / "again"))
    assert [(c["n_pairs"], c["excluded"]) for c in driver_view] == [(c["n_pairs"], c["excluded"]) for c in report_view]
    assert driver_view[0]["n_pairs"] == 2 and 1 in {e["repeat"] for e in driver_view[0]["excluded"]}
