"""Modes declare what they are as data: their role for the analysis and what they need of the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from ddpbench.cluster.static.backend import validate_static
from ddpbench.errors import ConfigError
from ddpbench.choices import Role
from helpers.cli import run_ddpbench

MODES = Path(__file__).resolve().parents[1] / "conf" / "mode"
EXPECTED = {"native": "baseline", "native_aa": "aa", "inject": "calibration", "inject_device": "calibration", "traceml": "tool",
            "traceml_manual": "tool", "traceml_disabled": "tool", "torch_profiler": "tool", "pyspy": "tool",
            "wandb_offline": "tool", "traceml_callback": "tool", "wandb_framework": "tool",
            "torch_profiler_framework": "tool"}


def test_every_shipped_mode_declares_its_role() -> None:
    files = sorted(MODES.glob("*.yaml"))
    assert {f.stem for f in files} == set(EXPECTED)
    for f in files:
        declared = yaml.safe_load(f.read_text()).get("role")
        assert declared == EXPECTED[f.stem] and declared in tuple(Role), f


def _static(mode: dict) -> object:
    return OmegaConf.create({
        "sweep_name": "shared", "mode": {"name": "m", "needs_shared_dir": False, **mode},
        "cluster": {"master_addr": "10.0.0.1", "rendezvous_timeout_s": 60.0, "nnodes": 2, "shared_dir": False},
    })


def test_a_mode_that_needs_a_shared_dir_says_so_and_its_command_is_not_read() -> None:
    with pytest.raises(ConfigError, match="shared_dir"):
        validate_static(_static({"needs_shared_dir": True, "command": ["torchrun"]}))
    validate_static(_static({"needs_shared_dir": False, "command": ["traceml", "--logs-dir=x"]}))


@pytest.mark.parametrize("mode,role,needs", [("traceml_manual", "tool", True), ("traceml_disabled", "tool", False),
                                             ("inject", "calibration", False)])
def test_the_composed_mode_carries_its_role_and_needs(tmp_path: Path, mode: str, role: str, needs: bool) -> None:
    run = run_ddpbench(["--cfg", "job", f"mode={mode}"], cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.output
    composed = yaml.safe_load(run.stdout)["mode"]
    assert (composed["role"], composed["needs_shared_dir"]) == (role, needs)


def test_a_role_outside_the_vocabulary_is_one_line_error(tmp_path: Path) -> None:
    run = run_ddpbench(["mode=native", "mode.role=probe"], cwd=tmp_path, timeout=120)
    assert run.returncode != 0 and "Invalid value 'probe', expected one of [baseline, tool, aa, calibration]" in run.stderr
    assert "Traceback" not in run.output
