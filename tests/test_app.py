"""End-to-end tests of the Hydra app with the real torchrun and the real `traceml run`.

The full paired native/traceml sweep runs from the built wheel (tests/test_packaging.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpbench import __version__

from helpers.cli import assert_nothing_left, only_sweep_dir, run_ddpbench, trials_in

FAST = ["model=tiny", "stop.steps=30", "stop.warmup_steps=3"]


@pytest.mark.slow
def test_local_2node_gives_world_size_four_across_two_node_ranks(tmp_path: Path) -> None:
    run = run_ddpbench(["cluster=local_2node", *FAST], tmp_path)
    assert run.returncode == 0, run.output
    trial = json.loads(next((tmp_path / "outputs" / "runs").glob("*/trial.json")).read_text())
    assert trial["status"] == "ok", trial["error"]
    assert trial["world_size"] == 4 and trial["nnodes"] == 2
    assert sorted({r["node_rank"] for r in trial["ranks"]}) == [0, 1]
    assert [n["node_rank"] for n in trial["nodes"]] == [0, 1]
    assert "status=ok" in run.stdout
    assert_nothing_left(str(tmp_path))


@pytest.mark.slow
def test_the_main_command_switches_and_its_verdict_weighs_the_lower_bound(tmp_path: Path) -> None:
    """The README's main command with its defaults (one pair, fewer steps): model=tiny and switching=auto, so both
    trials switch in blocks; TraceML's trace_step wraps the on-blocks only; the verdict line weighs the within-trial
    lower bound beside the whole-trial figures, which describe the tool fully on."""
    import subprocess
    import sys

    composed = subprocess.run([sys.executable, "-m", "ddpbench", "--cfg", "job"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
    assert "kind: auto" in composed.stdout and "steps: 4000" in composed.stdout and "hidden_dim: 32" in composed.stdout
    run = run_ddpbench(["-m", "mode=native,traceml", "repeat=1", "stop.steps=400", "switching=auto"], tmp_path)
    assert run.returncode == 0, run.output
    sweep = only_sweep_dir(tmp_path)
    trials = {t["mode"]: t for t in trials_in(sweep)}
    assert {m: t["switching"]["what"] for m, t in trials.items()} == {"native": "none", "traceml": "trace_step"}
    on_steps = sum(b["steps"] for b in trials["traceml"]["switching"]["blocks"] if b["side"] == "on")
    assert trials["traceml"]["traceml"]["steps_analyzed"] == trials["traceml"]["warmup_steps"] + on_steps
    (comparison,) = json.loads((sweep / "analysis.json").read_text())["comparisons"]
    assert comparison["verdict"]["lower_bound_confidence"] == 0.975 and comparison["verdict"]["lower_bound_pct"]
    line = next(l for l in (sweep / "report.md").read_text().splitlines() if l.startswith("- traceml vs native"))
    assert "within-trial lower bound" in line and "(97.5 %)" in line, line


def test_installed_configs_work_from_any_directory(tmp_path: Path) -> None:
    run = run_ddpbench(["--cfg", "job", "model=seed_e2e"], tmp_path, timeout=60)
    assert run.returncode == 0, run.output
    assert "hidden_dim: 4096" in run.stdout
    assert "name: local_cpu" in run.stdout


def test_user_mode_from_config_dir(tmp_path: Path) -> None:
    user_conf = tmp_path / "myconf" / "mode"
    user_conf.mkdir(parents=True)
    (user_conf / "mytool.yaml").write_text(
        "defaults:\n  - native\n  - _self_\nname: mytool\ndescription: native with an env var\n"
        "env:\n  MYTOOL_ON: '1'\n"
    )
    run = run_ddpbench(["--config-dir", str(tmp_path / "myconf"), "--cfg", "job", "mode=mytool"], tmp_path, timeout=60)
    assert run.returncode == 0, run.output
    assert "name: mytool" in run.stdout and "MYTOOL_ON" in run.stdout


def test_help_opens_with_what_ddpbench_does_and_version_exits_zero(tmp_path: Path) -> None:
    run = run_ddpbench(["--help"], tmp_path, timeout=60)
    assert run.returncode == 0, run.output
    assert run.stdout.startswith("ddpbench measures what a training-observability tool")
    for word in ("ddpbench -m mode=native,traceml", "ddpbench-report", "ddpbench-collect", "== Config groups",
                 "cluster: ", "mode: "):
        assert word in run.stdout, word
    version = run_ddpbench(["--version"], tmp_path, timeout=60)
    assert (version.returncode, version.stdout) == (0, f"ddpbench {__version__}\n")


@pytest.mark.parametrize("sweeper, target", [([], "paired_sweeper.PairedSweeper"), (["hydra/sweeper=basic"], "BasicSweeper")])
def test_sweeper_choice_composes_without_warnings(tmp_path: Path, sweeper: list, target: str) -> None:
    run = run_ddpbench([*sweeper, "--cfg", "hydra", "-p", "hydra.sweeper"], tmp_path, timeout=60)
    assert run.returncode == 0, run.output
    assert target in run.stdout and "Warning" not in run.stderr, run.output
    assert ("driver: ddpbench.sweep.driver.SweepDriver" in run.stdout) == (not sweeper)
