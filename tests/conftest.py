"""Session checks shared by every test module."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Iterator

import pytest
from hydra.core.singleton import Singleton

REPO = Path(__file__).resolve().parent.parent

#: Hydra's process-wide state before any test module ran: Hydra's own test suites expect a fresh process, and
#: an app decorated or composed earlier in this one (``ddpbench.app``) changes it (version base, config store)
FRESH_HYDRA_STATE = Singleton.get_state()


@pytest.fixture()
def fresh_hydra() -> Iterator[None]:
    """Hydra's state as a fresh process has it, for the test; the state before it afterwards."""
    before = Singleton.get_state()
    Singleton.set_state(copy.deepcopy(FRESH_HYDRA_STATE))
    yield
    Singleton.set_state(before)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once when the install cannot run the suite: Hydra's plugin scan does not see ddpbench's plugins
    (setuptools' default editable mode; tests run other Hydra apps with them), or the strict editable install
    misses a module of src/ (it links files one by one)."""
    import pkgutil

    import ddpbench
    import hydra_plugins

    if "ddpbench_sweeper" not in {module.name for module in pkgutil.iter_modules(hydra_plugins.__path__)}:
        pytest.exit("ddpbench: error: Hydra's plugin scan does not see hydra_plugins.ddpbench_sweeper (a default "
                    "editable install hides it): run bash scripts/setup.sh --test", returncode=2)
    tree = Path(ddpbench.__file__).parent.parent  # the editable link tree, src/ itself, or site-packages
    if not (tree / "ddpbench" / "__init__.py").is_symlink():
        return  # not a strict editable install: nothing to compare
    missing = [str(p.relative_to(REPO)) for p in sorted((REPO / "src").rglob("*.py"))
               if "egg-info" not in str(p) and not (tree / p.relative_to(REPO / "src")).exists()]
    if missing:
        pytest.exit(f"ddpbench: error: the editable install lacks {', '.join(missing[:3])}: run bash scripts/setup.sh",
                    returncode=2)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A marker selection that leaves nothing to run (``-m "not slow"`` on a file of slow tests) is not an error."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.config.getoption("markexpr"):
        session.exitstatus = pytest.ExitCode.OK
