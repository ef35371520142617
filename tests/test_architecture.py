"""The architecture as a checked contract: import layers (import-linter), types (mypy) and file sizes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: most lines a source file may have unless it holds one idea
MAX_LINES = 400
#: files allowed past MAX_LINES, relative to the repository root, each with the one idea it holds (none now)
ONE_IDEA: dict[str, str] = {}


def test_import_layers_hold() -> None:
    """``lint-imports`` checks the contracts of pyproject.toml's [tool.importlinter] (docs/architecture.md).

    Run on the interpreter under test (import-linter is in the test extras): a ``lint-imports`` found on PATH may
    be another environment's, without ddpbench.
    """
    command = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    proc = subprocess.run([sys.executable, "-c", command, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.slow
def test_types_hold() -> None:
    """mypy over src/ and benchmarks/ (a script importing a name the package no longer has fails here, not when
    someone next runs it) with pyproject.toml's [tool.mypy] settings, on the interpreter under test.

    Slow (about 7 CPU s without a cache; the big frameworks are read as opaque, see pyproject.toml), so it runs
    beside the other tests instead of before them.
    """
    proc = subprocess.run([sys.executable, "-m", "mypy", "src", "benchmarks"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.stdout.startswith("Success: no issues found in "), proc.stdout[-2000:]


def test_source_files_stay_small() -> None:
    sizes = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / "src").rglob("*.py")
    }
    assert len(sizes) > 30, "the source tree was not found"
    too_long = {name: n for name, n in sizes.items() if n > MAX_LINES and name not in ONE_IDEA}
    assert not too_long, f"files over {MAX_LINES} lines (split them at their seams, or name their one idea): {too_long}"
    assert {name for name in ONE_IDEA if sizes.get(name, 0) <= MAX_LINES} == set(), "an exception no file needs"


def test_every_package_is_in_a_layer() -> None:
    """The layer contract names every package and top-level module of ddpbench: nothing sits outside it."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    named = {name.strip() for layer in layers for name in layer.split("|")}
    source = ROOT / "src" / "ddpbench"
    parts = {f"ddpbench.{p.name}" for p in source.iterdir() if (p / "__init__.py").is_file()}
    parts |= {f"ddpbench.{p.stem}" for p in source.glob("*.py") if p.stem not in ("__init__", "__main__")}
    assert parts - named == set(), f"outside every layer of pyproject.toml's [tool.importlinter]: {sorted(parts - named)}"


def test_every_error_line_comes_from_the_one_printer() -> None:
    """A command that ends on an error says so through ddpbench.errors (error_line or fail), never by hand."""
    import re

    by_hand = re.compile(r"""print\(\s*f?["'][^"'\n]*: error: """)
    offenders = [f"{path.relative_to(ROOT)}:{number}" for path in (ROOT / "src").rglob("*.py")
                 if path.name != "errors.py"
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if by_hand.search(line)]
    assert offenders == [], f"error lines printed by hand (use ddpbench.errors.error_line): {offenders}"
