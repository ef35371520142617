"""Stop signals to a sweep's driver, with real processes: SIGINT, SIGTERM and SIGHUP
stop the running trial's processes, keep what finished, write the report of what finished with the sweep's
own baseline and budget, say so in one line and exit 128 + signal; a second signal during that cleanup
ends the driver at once. After each, no process of the sweep is left."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Tuple

import pytest

from helpers.cli import ONE_RANK, assert_nothing_left, start_ddpbench, wait_or_kill
from helpers.processes import wait_for_file, wait_for_text

pytestmark = pytest.mark.slow
# one mode that is not the default baseline (native): the report must use the sweep's own baseline and budget
# trials of 2 s that say when their timed loop runs: a signal after trial 2's first progress line lands mid-trial
SWEEP = ["-m", "mode=native_aa", "repeat=1-2", "model=tiny", "stop=duration", "stop.duration_sec=2",
         "stop.warmup_steps=3", "trial.log_every=10", "baseline=native_aa", "budget_pct=7.5", ONE_RANK, "sweep_name=stopped"]


def _stop_mid_second_trial(tmp_path: Path, *signals: signal.Signals) -> Tuple[int, str, Path, bytes]:
    """Run the sweep and send ``signals`` while trial 2 trains, each after the driver's line on the one before;
    (exit code, log, sweep dir, trial 1)."""
    log = tmp_path / "driver.log"
    sweep = tmp_path / "outputs" / "multirun" / "stopped"
    driver = start_ddpbench(SWEEP, tmp_path, log=log)
    output = lambda: log.read_text(errors="replace")  # noqa: E731
    try:
        first = wait_for_file(sweep, "*repeat=1*/trial.json", 120, alive=[driver], details=output)
        second_log = wait_for_file(sweep, "*repeat=2*/attempts/1/logs/node0.stdout.log", 60, alive=[driver],
                                   details=output)
        wait_for_text(second_log, "step=", 120, alive=[driver], details=output)
        finished = first.read_bytes()
        for index, signum in enumerate(signals):
            if index:  # the driver has begun its cleanup after the first signal
                wait_for_text(log, "ddpbench: interrupted", 30, alive=[driver], details=output)
            driver.send_signal(signum)
        code = wait_or_kill(driver, 60)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert_nothing_left(str(tmp_path), grace_s=10)
    assert first.read_bytes() == finished
    return code, log.read_text(), tmp_path / "outputs" / "multirun" / "stopped", finished


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_stop_signal_writes_the_report_of_what_finished_with_the_sweeps_settings(
        tmp_path: Path, signum: signal.Signals) -> None:
    code, output, sweep, _ = _stop_mid_second_trial(tmp_path, signum)
    assert code == 128 + signum, output
    how = "" if signum == signal.SIGINT else f" by {signum.name}"
    assert f"ddpbench: interrupted{how} after 1 of 2 trials; writing the report of what finished" in output
    assert (sweep / "report.md").is_file(), output
    analysis = json.loads((sweep / "analysis.json").read_text())
    assert (analysis["baseline"], analysis["budget_pct"]) == ("native_aa", 7.5)
    second = next(sweep.glob("*repeat=2*"))
    assert not (second / "trial.json").exists() or json.loads((second / "trial.json").read_text())["status"] != "ok"
    assert [p.name for p in second.iterdir() if p.name.startswith(".trial.json")] == []


def test_second_signal_during_cleanup_ends_the_driver_at_once(tmp_path: Path) -> None:
    code, output, _, _ = _stop_mid_second_trial(tmp_path, signal.SIGHUP, signal.SIGTERM)
    assert "ddpbench: interrupted by SIGHUP after 1 of 2 trials" in output, output
    assert code == 128 + signal.SIGTERM, output
    assert "ddpbench: SIGTERM during cleanup; exiting now" in output, output
