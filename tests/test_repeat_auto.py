"""repeat=auto on real trials: a large known per-step cost is decided in fewer pairs than allowed."""

import json
from pathlib import Path

import pytest

from ddpbench_cli import run_ddpbench


@pytest.mark.slow
def test_a_clear_overhead_stops_before_max_pairs(tmp_path: Path) -> None:
    run = run_ddpbench(
        ["-m", "mode=native,inject", "repeat=auto", "model=tiny", "stop.steps=30", "stop.warmup_steps=2",
         "inject.step_ms=15", "inject.startup_s=0", "inject.teardown_s=0", "precision.min_pairs=2",
         "precision.max_pairs=5", "precision.halfwidth_pct=null", "baseline=native", "sweep_name=auto1"],
        cwd=tmp_path, timeout=600,
    )
    assert run.returncode == 0, run.output
    sweep = tmp_path / "outputs" / "multirun" / "auto1"
    stopping = json.loads((sweep / "stopping.json").read_text())
    assert stopping["schema"] == "ddpbench.stopping" and stopping["rule"]["metric"] == "step_overhead_pct"
    [condition] = stopping["conditions"]
    assert condition["reason"] == "over", stopping
    assert 2 <= condition["pairs"] < 5
    comparison = condition["comparisons"]["inject"]
    assert comparison["ci_low"] > 2.0 and comparison["n"] == condition["pairs"]
    trials = sorted(sweep.glob("*/trial.json"))
    assert len(trials) == 2 * condition["pairs"], "the remaining pairs must be skipped"
    assert "stop after" in run.stdout and "up to 10 trials" in run.stdout
    report = (sweep / "report.md").read_text()
    assert "Why the sweep stopped (repeat=auto)" in report and "| over |" in report
