"""ddpbench installed the ordinary way runs its sweep from any folder: setuptools' default editable mode
(``pip install -e '.[tools]'``, where Hydra's plugin scan cannot see ddpbench's plugins). The wheel is
tests/test_packaging.py's: scripts/check-wheel.sh installs it with its dependencies into a bare venv and runs
the same sweep from an empty folder.

The install gets a fresh venv layered on the environment under test (its torch, Hydra and traceml-ai,
``--no-deps``) into which only ddpbench is installed, from a copy of this checkout; the strict editable
mode is the one the rest of the suite runs in.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

from helpers.cli import ONE_RANK, only_sweep_dir, pinned, trials_in
from helpers.processes import child_env, run_bounded

REPO = Path(__file__).resolve().parent.parent


def _layered_venv(path: Path) -> Path:
    """A venv that sees every site-packages dir of the running interpreter (below its own) and has nothing of its
    own yet.

    The running environment's own ddpbench stays out: its editable install is a ``.pth`` file (and, in strict
    mode, a link tree that ``.pth`` puts on ``sys.path``), and ``.pth`` files of a directory listed in another
    ``.pth`` file are not run. So the venv does not get the system site dir itself, whose ``.pth`` files would run.
    """
    venv.create(path, system_site_packages=False, with_pip=False, symlinks=True)
    python = path / "bin" / "python"
    site_dirs = [entry for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages")]
    (_purelib(python) / "environment_under_test.pth").write_text("\n".join(site_dirs) + "\n")
    return python


def _purelib(python: Path) -> Path:
    """The site-packages folder of ``python``'s environment."""
    return Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _checkout_copy(dest: Path) -> Path:
    subprocess.run(["bash", str(REPO / "scripts" / "copy-checkout.sh"), str(dest)], check=True, timeout=120)
    return dest


@pytest.fixture(scope="module", params=["default-editable"])
def installed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    """(mode, the venv's python, where its ddpbench must import from)."""
    mode = request.param
    root = tmp_path_factory.mktemp(mode)
    source = _checkout_copy(root / "checkout")
    python = _layered_venv(root / "venv")
    _pip(python, "-e", f"{source}[tools]")
    return mode, python, source / "src" / "ddpbench"


def _env() -> dict[str, str]:
    env = child_env()
    for name in ("PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


@pytest.mark.slow
def test_the_install_runs_a_paired_sweep_with_its_report_from_an_empty_folder(installed, tmp_path: Path) -> None:
    mode, python, package = installed
    user = tmp_path / "user"
    user.mkdir()
    where = subprocess.run([str(python), "-c", "import ddpbench; print(ddpbench.__file__)"], cwd=user, env=_env(),
                           capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve() == (package / "__init__.py").resolve(), f"{mode}: {where.stdout}"
    run = run_bounded([str(python), "-m", "ddpbench", *pinned(["-m", "mode=native,traceml", "repeat=1", "model=tiny",
                       "stop.steps=10", ONE_RANK])], timeout=300, env=_env(), cwd=user)
    assert run.returncode == 0, f"{mode}: {run.output[-4000:]}"
    sweep = only_sweep_dir(user)
    trials = trials_in(sweep)
    assert [(t["mode"], t["status"], t["world_size"]) for t in trials] == [("native", "ok", 1), ("traceml", "ok", 1)], \
        run.output[-4000:]
    report = (sweep / "report.md").read_text()
    assert "traceml vs native" in report
    plots = sorted((sweep / "plots").glob("*.png"))
    assert len(plots) == 4 and all(f"plots/{p.name}" in report for p in plots), plots
    assert f"ddpbench: report: {sweep.relative_to(user) / 'report.md'}" in run.stdout
