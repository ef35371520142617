"""ddpbench installed like a library: the plugins are thin and survive Hydra's plugin loader, the private
APIs used are bounded to the tested versions, and the built wheel works from an empty folder."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from helpers.cli import assert_nothing_left, only_sweep_dir
from helpers.sweeps import check_paired_native_traceml_sweep

REPO = Path(__file__).resolve().parent.parent
PLUGINS = REPO / "src" / "hydra_plugins" / "ddpbench_sweeper"
#: what a plugin module may import at module level (Hydra imports it in every Hydra app's plugin scan)
ALLOWED_TOP = {"hydra", "omegaconf", "hydra_plugins"} | set(sys.stdlib_module_names)
#: dependencies whose private parts ddpbench uses (see pyproject.toml): bounded to the versions tested
BOUNDED = ("hydra-core", "submitit", "hydra-submitit-launcher")


def _module_level_imports(path: Path) -> list[str]:
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
    return names


@pytest.mark.parametrize("path", sorted(PLUGINS.glob("*.py")), ids=lambda p: p.name)
def test_plugin_module_imports_only_hydra_omegaconf_and_stdlib(path: Path) -> None:
    imports = _module_level_imports(path)
    assert "__future__" not in imports, "Hydra's plugin loader breaks dataclasses under postponed annotations"
    assert not [name for name in imports if name.split(".")[0] not in ALLOWED_TOP], imports
    assert not [name for name in imports if name.startswith("hydra_plugins.ddpbench")]


def test_hydra_loader_imports_the_plugins_without_heavy_modules() -> None:
    """Load each plugin module as Hydra's scan does (exec_module outside sys.modules), in a fresh interpreter."""
    code = (
        "import importlib.util, sys, pathlib\n"
        f"for path in sorted(pathlib.Path({str(PLUGINS)!r}).glob('*.py')):\n"
        "    name = 'hydra_plugins.ddpbench_sweeper.' + path.stem\n"
        "    spec = importlib.util.spec_from_file_location(name, path)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pandas', 'seaborn', 'matplotlib',"
        " 'submitit', 'ddpbench'))\n"
        "print(heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", proc.stdout


@pytest.mark.parametrize("name", BOUNDED)
def test_private_api_dependencies_are_bounded_and_installed_inside_the_bound(name: str) -> None:
    requirements = [Requirement(r) for r in importlib.metadata.requires("ddpbench") or []]
    requirement = next(r for r in requirements if r.name == name and r.marker is None)
    assert any(spec.operator in ("<", "<=", "==", "~=") for spec in requirement.specifier), requirement
    installed = Version(importlib.metadata.version(name))
    assert requirement.specifier.contains(installed, prereleases=True), f"{name} {installed} not in {requirement}"


@pytest.mark.slow
def test_wheel_installs_and_runs_a_paired_sweep_from_an_empty_folder(tmp_path: Path) -> None:
    """scripts/check-wheel.sh: build, check contents, fresh venv, help/version, a sweep, another Hydra app;
    then the sweep it ran (a native/traceml pair, from the wheel) is checked in full here."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(PYTHON=sys.executable, RUN_IN=str(tmp_path / "user"))
    proc = subprocess.run(["bash", str(REPO / "scripts" / "check-wheel.sh")], env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr.rstrip().endswith("] ok"), proc.stderr[-2000:]
    user = tmp_path / "user"
    check_paired_native_traceml_sweep(only_sweep_dir(user), (user / "sweep.log").read_text(), pairs=1)
    assert_nothing_left(str(tmp_path))
