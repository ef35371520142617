"""The headline answers the user's question: per-step cost and fixed cost apart, projected onto a job.

Pure tests of :mod:`ddpbench.analysis.projection` and of the verdict on synthetic trials (known
answers), the ``ddpbench-report --job-hours`` option and its exit codes, and one real small sweep.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from ddpbench.analysis.projection import job_seconds, projected_pct, projected_values
from ddpbench.analysis.stats import paired_summary
from ddpbench.report.build import write_report
from ddpbench.report.cli import main
from helpers.cli import ONE_RANK, only_sweep_dir, run_ddpbench
from helpers.sweeps import check_paired_native_traceml_sweep
from helpers.trials import make_sweep

#: native: 5 s start-up, 100 s training (1000 steps of 100 ms), 1 s teardown
NATIVE = {"startup_s": 5.0, "train_s": 100.0, "teardown_s": 1.0}


def tool(step_pct: list[float], fixed_s: list[float]):
    """per_trial for make_sweep: traceml's step is step_pct[r] % slower, and it pays fixed_s[r] s more,
    split 60/40 between start-up and teardown."""

    def per_trial(mode: str, repeat: int) -> dict[str, Any]:
        if mode != "traceml":
            return dict(NATIVE)
        f = fixed_s[repeat - 1]
        return {"startup_s": 5.0 + 0.6 * f, "train_s": 100.0 * (1 + step_pct[repeat - 1] / 100),
                "teardown_s": 1.0 + 0.4 * f}

    return per_trial


def sweep(tmp_path: Path, step_pct: list[float], fixed_s: list[float]) -> Path:
    make_sweep(tmp_path / "s", repeats=len(step_pct), per_trial=tool(step_pct, fixed_s))
    return tmp_path / "s"


def test_projection_is_the_per_step_share_of_the_job_plus_the_fixed_cost_once() -> None:
    assert job_seconds(1.0) == 3600.0 and job_seconds(0.5) == 1800.0
    # +1 % per step over an hour is 36 s, plus 7.2 s once: 43.2 s of 3600 s
    assert projected_pct(1.0, 7.2, 3600.0) == pytest.approx(1.2)
    assert projected_pct(1.0, 7.2, 36000.0) == pytest.approx(1.02)
    assert math.isnan(projected_pct(1.0, math.nan, 3600.0)) and math.isnan(projected_pct(math.nan, 1.0, 3600.0))
    for bad in (0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            job_seconds(bad)


def test_the_projections_interval_is_the_t_interval_of_the_per_pair_sums() -> None:
    step, fixed = [0.2, 0.6, 0.4, 0.5], [7.0, 9.0, 6.0, 8.0]
    s = paired_summary(projected_values(step, fixed, 3600.0))
    per_pair = [a + 100 * b / 3600 for a, b in zip(step, fixed)]
    t = paired_summary(per_pair)
    assert (s.mean, s.ci_low, s.ci_high) == pytest.approx((t.mean, t.ci_low, t.ci_high))
    # the covariance counts: both parts rise together here, so the sum's interval is wider than
    # adding the parts' variances as if they were independent would give
    var_sum = paired_summary(step).sd ** 2 + (100 / 3600) ** 2 * paired_summary(fixed).sd ** 2
    assert s.sd > math.sqrt(var_sum)


def test_short_trials_over_budget_on_wall_time_are_within_for_the_job(tmp_path: Path) -> None:
    # +7 s start-up/teardown on 106 s trials: wall overhead about +7 %, way over the 2 % budget; per step
    # +0.5 %; an hour's job pays 0.5 % + 7 s / 3600 s = 0.69 %
    s = sweep(tmp_path, [0.4, 0.6, 0.5, 0.45, 0.55], [6.8, 7.2, 7.0, 6.9, 7.1])
    outcome = write_report([s], tmp_path / "out", budget_pct=2.0)
    (c,) = outcome.analysis.comparisons
    assert c.metrics["wall_overhead_pct"].ci_low > 2.0  # the trials' own wall time is over budget
    assert c.metrics["fixed_diff_s"].mean == pytest.approx(7.0)
    assert c.metrics["step_overhead_pct"].mean == pytest.approx(0.5)
    assert c.metrics["projected_overhead_pct"].mean == pytest.approx(0.5 + 100 * 7.0 / 3600)
    assert c.verdict.per_metric == {"step_overhead_pct": "within", "projected_overhead_pct": "within"}
    assert c.verdict.status == "within" and outcome.exit_code(fail_over_budget=True) == 0
    text = outcome.report_path.read_text()
    line = next(l for l in text.splitlines() if l.startswith("- traceml vs native"))
    assert re.search(r"\*\*within\*\* \(decided by: between-trial per-step, projected onto the job\) — per-step \+0\.500 ms \[[^]]+\] \(\+0\.50 % \[[^]]+\]\): within; "
                     r"fixed \+7\.00 s \[[^]]+\] per run \(start-up \+4\.20 s, teardown \+2\.80 s\); "
                     r"over a 1 h job: \+0\.69 % \[[^]]+\]: within\. These 106\.0 s trials' own wall overhead: \+7\.0", line), line
    assert "budget 2 % of a 1 h job" in text and "over a 1 h job %" in text  # the default is stated
    assert "| trial wall overhead % |" in text
    record = json.loads((tmp_path / "out" / "analysis.json").read_text())
    assert record["job_hours"] == 1.0
    assert record["comparisons"][0]["metrics"]["projected_overhead_pct"]["mean"] == pytest.approx(0.5 + 700 / 3600)
    # the same trials as the whole job: 106 s, where the fixed cost is most of it
    short = write_report([s], tmp_path / "short", budget_pct=2.0, job_hours=100 / 3600)
    (c,) = short.analysis.comparisons
    assert c.verdict.per_metric == {"step_overhead_pct": "within", "projected_overhead_pct": "over"}
    assert c.verdict.status == "over" and short.exit_code(fail_over_budget=True) == 1


def test_a_per_step_cost_over_budget_is_over_however_long_the_job(tmp_path: Path) -> None:
    s = sweep(tmp_path, [4.8, 5.2, 5.0, 4.9], [0.0, 0.1, -0.1, 0.0])
    for hours in (1.0, 1000.0):
        outcome = write_report([s], tmp_path / f"out{hours:g}", job_hours=hours)
        (c,) = outcome.analysis.comparisons
        assert c.metrics["wall_overhead_pct"].mean < 5.0
        assert c.verdict.per_metric == {"step_overhead_pct": "over", "projected_overhead_pct": "over"}
        assert outcome.exit_code(fail_over_budget=True) == 1


def test_an_inconclusive_per_step_cost_makes_the_verdict_inconclusive_however_small_the_fixed_cost(tmp_path: Path) -> None:
    s = sweep(tmp_path, [0.5, 4.0, 1.0, 3.5], [7.0, 7.0, 7.0, 7.0])
    outcome = write_report([s], tmp_path / "out")
    (c,) = outcome.analysis.comparisons
    assert c.verdict.per_metric["step_overhead_pct"] == "inconclusive" and c.verdict.status == "inconclusive"
    assert outcome.exit_code(fail_over_budget=True) == 3


def test_cli_job_hours(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = sweep(tmp_path, [0.4, 0.6, 0.5], [7.0, 7.2, 6.8])
    assert main([str(s), "--job-hours", "24", "--fail-over-budget"]) == 0
    assert "over a 24 h job" in (s / "report.md").read_text()
    assert json.loads((s / "analysis.json").read_text())["job_hours"] == 24.0
    assert main([str(s), "--job-hours", "0.01", "--fail-over-budget"]) == 1  # 36 s: the 7 s is 19 % of it
    capsys.readouterr()
    assert main([str(s), "--job-hours", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "ddpbench-report: error: job hours 0.0: must be a number > 0 (hours of training)\n"


@pytest.mark.slow
def test_a_real_sweeps_headline_states_per_step_and_fixed_cost_apart(tmp_path: Path) -> None:
    run = run_ddpbench(["-m", "mode=native,traceml", "repeat=1-2", "model=tiny", "stop.steps=30",
                        "stop.warmup_steps=2", "report.job_hours=2", ONE_RANK], cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.output
    check_paired_native_traceml_sweep(only_sweep_dir(tmp_path), run.stdout, pairs=2, ranks=1)
    text = (only_sweep_dir(tmp_path) / "report.md").read_text()
    assert "budget 2 % of a 2 h job" in text
    line = next(l for l in text.splitlines() if l.startswith("- traceml vs native"))
    assert re.search(r": \*\*(within|over|inconclusive)\*\*( \(decided by: [^)]+\))? — per-step [+-]\d+\.\d{3} ms \[[^]]+\] \([+-]\d+\.\d\d % "
                     r"\[[^]]+\]\): (within|over|inconclusive); fixed [+-]\d+\.\d\d s \[[^]]+\] per run \(start-up "
                     r"[+-]\d+\.\d\d s, teardown [+-]\d+\.\d\d s\); over a 2 h job: [+-]\d+\.\d\d % \[[^]]+\]: "
                     r"(within|over|inconclusive)\. These \d+\.\d s trials' own wall overhead: ", line), line


def test_report_job_hours_is_a_checked_config_key(tmp_path: Path) -> None:
    run = run_ddpbench(["--cfg", "job"], cwd=tmp_path, timeout=120)
    assert run.returncode == 0 and "report:\n  job_hours: 1.0" in run.stdout, run.output
    run = run_ddpbench(["mode=native", "report.job_hours=0"], cwd=tmp_path, timeout=120)
    assert run.returncode != 0 and "report.job_hours=0.0: must be > 0" in run.stderr, run.output
    assert "Traceback" not in run.output
