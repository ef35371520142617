"""Known-answer calibration: the analysis recovers injected costs exactly on synthetic
trials shaped like real ones, and a short real sweep with pinned ranks recovers a large injected step cost."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ddpbench.analysis.paired import analyze, applied_injection
from ddpbench.collect.collector import flatten_trial
from ddpbench.formats.trial_record import FORMAT, LOAD_KEYS
from ddpbench.workload import affinity
from helpers.cli import only_sweep_dir, run_ddpbench, trials_in
from helpers.trials import make_trial, step_summary

INJ = {"step_ms": 5.0, "startup_s": 3.0, "teardown_s": 2.0}


def _flags(inj: dict[str, float]) -> list[str]:
    return [f"--inject-step-ms={inj['step_ms']}", f"--inject-startup-sec={inj['startup_s']}",
            f"--inject-teardown-sec={inj['teardown_s']}"]


def real_shaped(mode: str, repeat: int, workload_args: list[str], **kw: Any) -> dict[str, Any]:
    """A trial whose config looks like a real sweep's: every mode carries the sweep's ``inject``
    block (Hydra resolves it for all modes), only the inject mode passes the flags."""
    trial = make_trial(mode=mode, repeat=repeat, pair_position=repeat % 2 if mode == "native" else 1 - repeat % 2,
                       inject=INJ, **kw)
    trial["config"]["mode"]["workload_args"] = workload_args
    return trial


def frame_of(trials: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([flatten_trial(FORMAT.upgrade(t), f"/x/{i}/trial.json") for i, t in enumerate(trials)])


def calibration_items(trials: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = [c for c in analyze(frame_of(trials)).comparisons if c.mode.startswith("inject")]
    assert c.role == "calibration"
    return {i.name: i for i in c.calibration.items}


def test_exact_recovery_when_baseline_config_carries_inject_block() -> None:
    trials = []
    for r in range(1, 6):
        noise = 0.1 * r  # the same run-to-run noise on both sides cancels in the pair
        trials.append(real_shaped("native", r, [], step_ms=20.0 + noise, startup_s=4.0 + noise, teardown_s=1.0))
        trials.append(real_shaped("inject", r, _flags(INJ), step_ms=25.0 + noise, startup_s=7.0 + noise,
                                  teardown_s=3.0))
    items = calibration_items(trials)
    for name, value in (("per-step overhead", 5.0), ("startup difference", 3.0), ("teardown difference", 2.0)):
        assert items[name].injected == pytest.approx(value)
        assert items[name].recovered == pytest.approx(value)
        assert items[name].error_pct == pytest.approx(0.0, abs=1e-9)
        assert items[name].within_tolerance is True


def test_only_the_flags_a_mode_passes_count_as_injected() -> None:
    trials = []
    for r in range(1, 4):
        trials.append(real_shaped("native", r, [], step_ms=20.0))
        trials.append(real_shaped("inject_step", r, ["--inject-step-ms", "5.0"], step_ms=25.5))
    items = calibration_items(trials)
    assert items["per-step overhead"].injected == 5.0
    assert items["per-step overhead"].error_pct == pytest.approx(10.0)
    assert items["per-step overhead"].within_tolerance is True
    assert items["startup difference"].within_tolerance is None  # in config.inject, but not passed
    assert items["teardown difference"].within_tolerance is None


def test_applied_injection_falls_back_to_config_inject_without_workload_args() -> None:
    row = flatten_trial(make_trial(mode="inject", inject=INJ), "/x/0/trial.json")
    assert applied_injection(row, "startup_s") == 3.0
    row = flatten_trial(real_shaped("native", 1, []), "/x/0/trial.json")
    assert applied_injection(row, "startup_s") == 0.0


def gpu_shaped(mode: str, repeat: int, workload_args: list[str], host_sync: str, busy_ms: float, idle_ms: float,
               step_ms: float) -> dict[str, Any]:
    """A GPU trial: its host step and its GPU split per step (trial record v5), the loop's host-sync pattern."""
    trial = real_shaped(mode, repeat, workload_args, step_ms=step_ms)
    trial.update(host_sync=host_sync, gpu_time_ms={"busy": step_summary(busy_ms), "idle": step_summary(idle_ms),
                                                   "late_reads": 0})
    trial["config"]["inject"] = {**INJ, "device_step_ms": 2.0}
    return trial


def test_a_host_wait_is_judged_where_the_loop_lets_it_show() -> None:
    """The seed loop (host and GPU serialised): a 2 ms host wait is the host step Δ and the GPU-idle Δ, both judged.
    A GPU-bound loop without synchronisation: the same wait hides in the host's lead and is not judged."""
    seed, hidden = [], []
    for r in range(1, 4):
        seed.append(gpu_shaped("native", r, [], "seed", busy_ms=3.0, idle_ms=2.0, step_ms=5.0))
        seed.append(gpu_shaped("inject", r, ["--inject-step-ms=2.0"], "seed", busy_ms=3.0, idle_ms=4.05, step_ms=7.1))
        hidden.append(gpu_shaped("native", r, [], "none", busy_ms=4.99, idle_ms=0.01, step_ms=5.0))
        hidden.append(gpu_shaped("inject", r, ["--inject-step-ms=2.0"], "none", busy_ms=4.99, idle_ms=0.01, step_ms=5.2))
    items = calibration_items(seed)
    step, idle = items["per-step overhead"], items["host wait in GPU idle"]
    assert (step.side, step.knowable, step.within_tolerance) == ("host", True, True)
    assert step.recovered == pytest.approx(2.1) and "synchronised every step (host_sync=seed" in step.where
    assert (idle.side, idle.knowable, idle.within_tolerance) == ("host", True, True)
    assert idle.recovered == pytest.approx(2.05)
    assert "device wait in GPU busy" not in items  # nothing was queued on the device
    items = calibration_items(hidden)
    step = items["per-step overhead"]
    assert step.knowable is False and step.within_tolerance is None and "GPU-bound" in step.where
    assert step.error_pct == pytest.approx(-90.0)  # shown, not judged


def test_a_device_wait_shows_in_gpu_busy_in_any_loop_and_in_the_step_where_the_gpu_is_the_bottleneck() -> None:
    device = ["--inject-device-step-ms=2.0"]
    host_bound, serial = [], []
    for r in range(1, 4):  # the GPU idles 3 ms of every 5 ms step: a 2 ms device wait runs in that idle time
        host_bound.append(gpu_shaped("native", r, [], "none", busy_ms=2.0, idle_ms=3.0, step_ms=5.0))
        host_bound.append(gpu_shaped("inject_device", r, device, "none", busy_ms=4.02, idle_ms=0.98, step_ms=5.0))
        serial.append(gpu_shaped("native", r, [], "seed", busy_ms=2.0, idle_ms=3.0, step_ms=5.0))
        serial.append(gpu_shaped("inject_device", r, device, "seed", busy_ms=4.0, idle_ms=3.0, step_ms=7.05))
    items = calibration_items(host_bound)
    busy, step = items["device wait in GPU busy"], items["device wait in the host step"]
    assert (busy.side, busy.injected, busy.knowable, busy.within_tolerance) == ("device", 2.0, True, True)
    assert busy.recovered == pytest.approx(2.02)
    assert step.knowable is False and step.within_tolerance is None and "host-bound" in step.where
    assert "per-step overhead" not in items  # no host wait: the host step is the device wait's figure here
    items = calibration_items(serial)
    assert items["device wait in the host step"].within_tolerance is True
    assert items["device wait in the host step"].recovered == pytest.approx(2.05)
    (c,) = [c for c in analyze(frame_of(serial)).comparisons if c.mode == "inject_device"]
    assert c.calibration.all_within is True
    groups = {(r.group, r.name): r for r in c.rows}
    assert groups[("gpu", "GPU busy")].diff.mean == pytest.approx(2.0)
    assert groups[("gpu", "GPU idle")].diff.mean == pytest.approx(0.0)


@pytest.mark.slow
@pytest.mark.quiet
def test_a_real_sweep_with_pinned_ranks_recovers_the_injected_step_cost(tmp_path: Path) -> None:
    """native against inject (20 ms per step, nothing else), each rank on its own CPU: every trial's load
    and pinning recorded, only inject applies the wait, and the calibration finds it."""
    # 20 ms: on the shared 2-core machine each step also pays the slower rank's late wake-up
    # (+2-4 ms at load 8, docs/accuracy.md), which must stay inside the ratio bound below
    step_ms = 20.0
    run = run_ddpbench(["-m", "mode=native,inject", "repeat=1-2", "model=tiny", "stop.steps=100", "stop.warmup_steps=5",
                        f"inject.step_ms={step_ms:g}", "inject.startup_s=0", "inject.teardown_s=0",
                        "cluster.cpu_affinity=auto"], tmp_path, timeout=240)
    assert run.returncode == 0, run.output
    sweep = only_sweep_dir(tmp_path)
    trials = trials_in(sweep)
    assert sorted(t["mode"] for t in trials) == ["inject", "inject", "native", "native"]
    assert all(t["status"] == "ok" for t in trials), [t["error"] for t in trials]
    expected = affinity.plan("auto", sorted(os.sched_getaffinity(0)), 2)
    for t in trials:
        assert t["config"]["inject"]["step_ms"] == step_ms  # every mode's config carries it ...
        passed = any(str(a).startswith("--inject-step-ms=") for a in t["config"]["mode"]["workload_args"])
        assert passed == (t["mode"] == "inject")  # ... only inject applies it
        load = t["load"]
        assert set(load) == set(LOAD_KEYS)
        assert load["n_cpus"] == len(os.sched_getaffinity(0)) and load["own_cpus"] == len(expected.rank_cpus)
        assert load["cpu_affinity"]["setting"] == "auto"
        assert load["cpu_affinity"]["rank_cpus"] == [list(g) for g in expected.ranks]
        assert load["foreign_cpu_s"] >= 0 and load["load1_start"] >= 0
        records = [json.loads(p.read_text()) for p in Path(t["job_dir"]).rglob("rank-*.json")]
        pinned = {r["local_rank"]: r["cpu_affinity"] for r in records}
        assert [r["inject"]["step_ms"] for r in records] == [step_ms if t["mode"] == "inject" else 0.0] * 2
        assert pinned == {i: list(g) for i, g in enumerate(expected.ranks)}  # as each rank read its own mask

    data = json.loads((sweep / "analysis.json").read_text())
    (c,) = [c for c in data["comparisons"] if c["mode"] == "inject"]
    items = {i["name"]: i for i in c["calibration"]["items"]}
    step = items["per-step overhead"]
    assert step["injected"] == pytest.approx(step_ms)
    assert 0.8 <= step["recovered"] / step_ms <= 1.25, f"recovered {step['recovered']:.2f} ms of {step_ms} ms; " \
        f"load {[t['load'] for t in trials]}"
    assert items["startup difference"]["within_tolerance"] is None

    report = (sweep / "report.md").read_text()
    assert "Calibration (inject vs native" in report
    assert f"per-step overhead injected {step_ms:.3f} ms on the host" in report
    assert "nothing injected" not in report
