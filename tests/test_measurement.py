"""Measurement: the injected wait, CPU pinning and the trial's load record.

Pure parts (the CPU-list parser and planner, the foreign-CPU arithmetic) use synthetic input; the
rest runs the real command line (torchrun, 2 ranks, model=tiny) or real processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddpbench.analysis.disturbance import TrialLoad, trial_disturbance
from ddpbench.trial import load as trial_load
from ddpbench.workload import affinity
from ddpbench.workload.timing import InjectedWait, wait_until_known

from helpers.cli import run_ddpbench
from helpers.processes import wait_for


def _hog() -> subprocess.Popen:
    """A process outside any trial's tree that spins one CPU until killed."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _cpu_s(pid: int) -> float:
    rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / trial_load.CLK_TCK


# --- the injected per-step cost ---

@pytest.mark.quiet  # its bounds are wall and CPU time: beside other tests a wake-up can come 10 ms late
def test_injected_wait_ends_on_time_and_leaves_the_cpu() -> None:
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _ in range(5):
        wait_until_known(0.020)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert wall >= 0.100
    assert wall < 0.100 + 5 * 0.010  # each wait ends within 10 ms of its deadline even on a loaded machine
    assert cpu < 0.25 * wall, f"spun {cpu * 1e3:.1f} ms of {wall * 1e3:.1f} ms"  # a busy-wait would be ~100 %


@pytest.mark.quiet
def test_injected_wait_pays_back_late_wake_ups() -> None:
    wait = InjectedWait(0.004)
    t0 = time.perf_counter()
    for _ in range(50):
        wait()
    total = time.perf_counter() - t0
    # 50 x 4 ms to within one call's overrun, however late single wake-ups came
    assert abs(total - 0.200) <= 0.010 + max(wait.overrun_s, 0.0), (total, wait.overrun_s)
    assert wait.overrun_s < 0.010


# --- cluster.cpu_affinity: parsing and planning (pure) ---

@pytest.mark.parametrize("text, cpus", [("0", (0,)), ("0,1", (0, 1)), ("0-3", (0, 1, 2, 3)), ("3,0-1", (3, 0, 1)),
                                        ([2, 0], (2, 0)), (1, (1,))])
def test_cpu_lists_parse(text: object, cpus: tuple[int, ...]) -> None:
    assert affinity.parse_setting(text) == cpus


@pytest.mark.parametrize("text", ["foo", "3-1", "0,,1", "-1", "1.5", "auto,0", ""])
def test_bad_cpu_lists_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="must be auto, none or a CPU list"):
        affinity.parse_setting(text)


def test_auto_keeps_a_cpu_for_the_driver_when_cpus_allow() -> None:
    spare = affinity.plan("auto", range(8), 2)
    assert spare.ranks == ((2, 3, 4), (5, 6, 7)) and spare.others == (0, 1) and spare.note is None
    tight = affinity.plan("auto", [0, 1], 2)
    assert tight.ranks == ((0,), (1,)) and tight.others is None
    assert "driver and agents share the ranks' CPUs" in (tight.note or "")
    assert affinity.plan("none", [0, 1], 2).ranks == ()


def test_listed_cpus_go_to_the_ranks_in_order() -> None:
    listed = affinity.plan((3, 2), range(4), 2)
    assert listed.ranks == ((3,), (2,)) and listed.others == (0, 1)
    assert listed.env_value() == "plan:3;2"
    with pytest.raises(ValueError, match="CPU 9 is not available"):
        affinity.plan((0, 9), range(4), 2)
    shared = affinity.plan((0,), range(4), 2)
    assert shared.ranks == ((0,), (0,)) and "ranks share CPUs" in (shared.note or "")


def test_rank_slot_on_a_host_with_several_node_agents() -> None:
    env = {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"}
    assert affinity.slot_cpus("plan:0;1;2;3", env) == (3,)
    assert affinity.slot_cpus("plan:0;1", env) == (1,)  # one agent per host: the local rank decides
    with pytest.raises(ValueError, match="expected auto or plan:"):
        affinity.slot_cpus("0;1", env)


# --- the load section: foreign CPU time ---

def test_foreign_ticks_count_each_process_once_in_the_window() -> None:
    start = {10: (100, 50), 11: (100, 30), 12: (90, 7)}
    end = {
        10: (100, 80),   # ran through: +30
        11: (200, 5),    # pid reused by a process born in the window: +5
        13: (300, 12),   # born in the window: +12
        14: (50, 40),    # old, first seen now (not listed at the start): 0
    }
    # 11 (old) and 12 vanished: their whole lives (30 + 7) moved into their reapers' counts
    assert trial_load.foreign_ticks(start, end, start_uptime_ticks=150) == 30 + 5 + 12 - 30 - 7
    assert trial_load.foreign_ticks({1: (0, 100)}, {}, 10) == 0  # clamped


def test_a_cpu_hog_outside_the_tree_is_counted() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    hog = _hog()
    try:
        wait_for(lambda: _cpu_s(hog.pid) > 0.05, 30, "the hog spinning")
        start = trial_load.sample(root_pid=sleeper.pid)
        hog_start = _cpu_s(hog.pid)
        wait_for(lambda: _cpu_s(hog.pid) - hog_start >= 0.5, 60, "half a CPU second of the hog in the window")
        hog_used = _cpu_s(hog.pid) - hog_start
        end = trial_load.sample(root_pid=sleeper.pid)
    finally:
        _stop(hog)
        _stop(sleeper)
    foreign = trial_load.foreign_ticks(start.foreign, end.foreign, start.uptime_ticks) / trial_load.CLK_TCK
    assert hog_used > 0.1, hog_used
    assert foreign >= hog_used - 2 / trial_load.CLK_TCK, (foreign, hog_used)  # the hog's window, to the tick
    assert start.cost_s < 0.2 and end.cost_s < 0.2, (start.cost_s, end.cost_s)  # seconds per sample (~2 ms idle)


# --- through the real command line ---

@pytest.mark.slow
def test_bad_cpu_affinity_fails_in_one_line_before_anything_runs(tmp_path: Path) -> None:
    for value in ("foo", "3-1", "4096"):
        run = run_ddpbench(["-m", "mode=native,native_aa", "model=tiny", f"cluster.cpu_affinity={value}"], tmp_path,
                           timeout=60)
        assert run.returncode != 0, run.output
        lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("ddpbench: error: cluster.cpu_affinity="), run.output
        assert not (tmp_path / "outputs" / "multirun").exists() or not any((tmp_path / "outputs" / "multirun").rglob("trial.json"))


@pytest.mark.slow
def test_a_cpu_hog_beside_a_trial_is_recorded_as_foreign_load(tmp_path: Path) -> None:
    hog = _hog()
    try:
        run = run_ddpbench(["mode=native", "model=tiny", "stop.steps=60", "stop.warmup_steps=2", "sweep_name=hogged"],
                           tmp_path, timeout=120)
    finally:
        _stop(hog)
    assert run.returncode == 0, run.output
    trial = json.loads((tmp_path / "outputs" / "runs" / "hogged" / "trial.json").read_text())
    load = trial["load"]
    assert load["cpu_affinity"]["setting"] == "none" and load["own_cpus"] is None
    # the hog spun the whole trial: at least a third of a CPU over the trial's wall
    assert load["foreign_cpu_s"] > trial["wall_s"] / 3, load
    flagged = trial_disturbance(TrialLoad(wall_s=trial["wall_s"], n_cpus=load["n_cpus"], own_cpus=2,
                                          foreign_cpu_s=load["foreign_cpu_s"], steal_s=load["steal_s"]))
    assert flagged is not None and "other processes used" in flagged
