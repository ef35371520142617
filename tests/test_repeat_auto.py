"""repeat=auto on real trials, one sweep: a pair disturbed by a real CPU hog is re-run instead of counted, a
large known per-step cost is decided at the first look the rule allows, and the stop is the rule's decision on
the counted pairs.

The sweep decides on ``step_median_overhead_ms``, the difference of the two trials' median step. The
injected wait (50 ms per step, on a ~2 ms ``model=tiny`` step) makes the difference ~50 ms, while the
trial-to-trial noise of a median step is a few ms even on a loaded 2-core machine: a stall lengthens a
few steps, not the median. The percent metrics divide by the native step, whose trial-to-trial spread
on a loaded machine is tens of percent, so a cost of +2,500 % is no more decisive than one of +25 %;
that is why the percent metric needed every pair of a small ``max_pairs`` when the machine was busy.
"""

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from ddpbench.analysis.sequential import boundaries, replay
from helpers.cli import ONE_RANK, start_ddpbench, wait_or_kill
from helpers.processes import first_file, wait_for

INJECTED_MS = 50.0
BUDGET_MS = 2.0
DECIDE = ["mode=native,inject", "repeat=auto", "model=tiny", "stop.steps=20", "stop.warmup_steps=2",
          f"inject.step_ms={INJECTED_MS:g}", "inject.startup_s=0", "inject.teardown_s=0",
          "precision.metric=step_median_overhead_ms", f"precision.budget_ms={BUDGET_MS:g}",
          "precision.halfwidth_pct=null", "baseline=native", ONE_RANK]


def median_differences(sweep: Path, repeats: List[int]) -> List[float]:
    """Per repeat, the inject trial's median step minus the native trial's (ms), read from the trial records."""
    medians = {}
    for path in sweep.glob("*/trial.json"):
        trial = json.loads(path.read_text())
        medians[(int(trial["repeat"]), trial["mode"])] = float(trial["step_time_ms"]["median"])
    return [medians[(r, "inject")] - medians[(r, "native")] for r in repeats]


def assert_stop_is_the_rules(condition: dict[str, Any], sweep: Path, min_pairs: int, max_pairs: int) -> None:
    """The driver's stop is what the rule decides on the counted pairs' recorded figures."""
    values = median_differences(sweep, condition["counted"])
    again = replay(values, BUDGET_MS, 0.95, None, min_pairs, max_pairs)
    if condition["reason"] == "max_pairs":  # every pair allowed ran, the counted ones decided nothing
        assert condition["pairs"] == max_pairs and again.reason in (None, "max_pairs"), (condition, values, again)
    else:
        assert (again.reason, again.n) == (condition["reason"], len(values)), (condition, values, again)
        comparison = condition["comparisons"]["inject"]
        assert comparison["ci_low"] == pytest.approx(again.ci_low) and comparison["n"] == again.n


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
@pytest.mark.quiet
def test_a_hogged_pair_is_re_run_and_a_clear_overhead_stops_at_the_first_look(tmp_path: Path) -> None:
    """Pair 1 runs beside a CPU hog: it is re-run, not counted, and named. The first look the rule allows
    (``min_pairs`` counted pairs) decides the 50 ms cost, and the pairs left are skipped."""
    # room for the hogged pair and for a pair the shared machine disturbs, and still pairs left to skip
    min_pairs, max_pairs = 3, 6
    sweep = tmp_path / "outputs" / "multirun" / "hogged"
    log = tmp_path / "driver.log"
    args = ["-m", *DECIDE, f"precision.min_pairs={min_pairs}", f"precision.max_pairs={max_pairs}", "sweep_name=hogged"]
    with cpu_hog():  # for the first trial only: pair 1 is disturbed
        driver = start_ddpbench(args, tmp_path, log=log)
        wait_for(lambda: first_file(sweep, "*/trial.json"), 240, "the first trial's record", alive=[driver],
                 details=lambda: log.read_text(errors="replace"))
    exit_code = wait_or_kill(driver, 400)
    output = log.read_text()
    assert exit_code == 0, f"exit code {exit_code}\n{output}"
    stopping = json.loads((sweep / "stopping.json").read_text())
    assert stopping["schema"] == "ddpbench.stopping" and stopping["schema_version"] == 2
    assert stopping["rule"]["disturbed"] == "rerun" and stopping["rule"]["metric"] == "step_median_overhead_ms"
    [condition] = stopping["conditions"]
    excluded = {e["repeat"]: e["why"] for e in condition["excluded"]}
    assert "other processes used" in excluded.get(1, ""), (condition, output)
    # the hogged pair is not counted and later repeats took its place (a pair the shared machine disturbed
    # is replaced too); the stop is the rule's own decision on the counted pairs
    assert 1 not in condition["counted"] and condition["pairs"] == len(excluded) + len(condition["counted"]), condition
    trials = len(list(sweep.glob("*/trial.json")))
    assert "stop after" in output and f"up to {2 * max_pairs} trials" in output
    assert "pair 1 disturbed (native trial: other processes used" in output and "re-run, not counted" in output
    report = (sweep / "report.md").read_text()
    stopping_part = report.split("## Why the sweep stopped", 1)[1].split("\n## ", 1)[0]
    if len(condition["counted"]) < min_pairs:
        # another job used the CPU all along (a quiet test keeps only the suite's own tests away): every pair was
        # disturbed, none may decide, and the sweep spends its max_pairs and says why each pair was not counted
        assert all("other processes used" in why for why in excluded.values()), (excluded, output)
        assert condition["reason"] == "max_pairs" and trials == 2 * max_pairs, (condition, trials)
        assert "| over |" not in stopping_part
    else:
        values = median_differences(sweep, condition["counted"])
        # the first look decides unless the differences' SD exceeds (mean - budget) * sqrt(n) / c: ~17 ms here
        bound = (sum(values) / len(values) - BUDGET_MS) * min_pairs ** 0.5 / boundaries(0.05, min_pairs, max_pairs)[0]
        assert condition["reason"] == "over" and len(condition["counted"]) == min_pairs, (stopping, values, bound)
        assert_stop_is_the_rules(condition, sweep, min_pairs, max_pairs)
        assert condition["comparisons"]["inject"]["ci_low"] > BUDGET_MS
        assert trials == 2 * condition["pairs"] < 2 * max_pairs, "the pairs left must be skipped"
        assert "| over |" in stopping_part
    assert f": pair 1 disturbed ({excluded[1]}): re-run, not counted." in stopping_part
    assert f"- Not counted: pair 1 disturbed ({excluded[1]}): re-run, not counted." in report
    # ddpbench-report on the sweep gives the driver's answer: the same pairs left out and counted
    again = subprocess.run([sys.executable, "-m", "ddpbench.report", str(sweep), "--out", str(tmp_path / "again")],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    driver_view, report_view = (json.loads((d / "analysis.json").read_text())["comparisons"]
                                for d in (sweep, tmp_path / "again"))
    assert [(c["n_pairs"], c["excluded"]) for c in driver_view] == [(c["n_pairs"], c["excluded"]) for c in report_view]
    assert driver_view[0]["n_pairs"] == len(condition["counted"])
    assert 1 in {e["repeat"] for e in driver_view[0]["excluded"]}
