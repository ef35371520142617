"""The suite's parallel groups (tests/conftest.py): a test joins the worker of the resource it needs, whatever
else it uses, so a session-scoped cluster or cache is made once per run."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, Tuple

import pytest

from conftest import QUIET_GROUP, worker_group


@dataclass
class FakeItem:
    """What worker_group reads of a collected test: its fixture closure with scopes, its markers, its module."""

    scopes: Dict[str, str] = field(default_factory=dict)
    markers: Tuple[str, ...] = ()
    nodeid: str = "tests/test_x.py::test_x"
    module: Any = field(default_factory=lambda: SimpleNamespace(__name__="test_x"))

    @property
    def fixturenames(self) -> list:
        return list(self.scopes)

    @property
    def _fixtureinfo(self) -> Any:
        return SimpleNamespace(name2fixturedefs={name: [SimpleNamespace(scope=scope)]
                                                 for name, scope in self.scopes.items()})

    def get_closest_marker(self, name: str) -> Any:
        return getattr(pytest.mark, name) if name in self.markers else None


def group(**kwargs: Any) -> Any:
    return worker_group(FakeItem(**kwargs))  # type: ignore[arg-type]


def test_a_resource_decides_whatever_other_session_fixtures_sort_before_it() -> None:
    assert group(scopes={"slurm_cluster": "session", "a_cache": "session", "tmp_path": "function"}) == "slurm"
    assert group(scopes={"slurm_cluster": "session"}) == "slurm"
    assert group(scopes={"ray_cluster": "module", "a_sweep": "module"}) == "ray"


def test_both_tool_environment_fixtures_share_one_group() -> None:
    assert group(scopes={"env_cache": "session"}) == group(scopes={"downloads": "session", "env_cache": "session"})


def test_a_slurm_test_without_the_fixture_joins_the_cluster_s_worker() -> None:
    assert group(scopes={"tmp_path": "function"}, markers=("slurm",)) == "slurm"


def test_other_shared_fixtures_and_quiet_tests_keep_their_groups() -> None:
    assert group(scopes={"b_thing": "session", "a_thing": "session"}) == "a_thing"
    assert group(scopes={"sweep": "module"}) == "test_x"
    assert group(scopes={"tmp_path": "function"}, markers=("quiet",)) == QUIET_GROUP
    assert group(scopes={"tmp_path": "function"}) is None


_SHARED_RESOURCE = '''
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def env_cache() -> Path:
    out = Path(os.environ["GROUPS_TEST_OUT"])
    (out / f"started-{os.environ['PYTEST_XDIST_WORKER']}-{os.getpid()}").touch()
    return out
'''

_USER_MODULE = '''
import os

from resource_fixture import env_cache  # noqa: F401


def test_first(env_cache):
    (env_cache / f"ran-{{__name__}}-first-{{os.environ['PYTEST_XDIST_WORKER']}}").touch()


def test_second(env_cache):
    (env_cache / f"ran-{{__name__}}-second-{{os.environ['PYTEST_XDIST_WORKER']}}").touch()


def test_free_{index}():
    pass
'''


@pytest.mark.slow  # a real pytest -n 2 run
def test_a_resource_s_tests_from_three_modules_run_on_one_worker_under_real_xdist(tmp_path: Path) -> None:
    """The suite's own conftest under real pytest-xdist workers: three modules share one session resource, which
    is then made once, on one worker (pytest 9.2 with xdist's own loadgroup spread them: one per module)."""
    tests_dir = Path(__file__).resolve().parent
    (tmp_path / "conftest.py").write_text((tests_dir / "conftest.py").read_text())
    (tmp_path / "resource_fixture.py").write_text(_SHARED_RESOURCE)
    for index, name in enumerate("abc"):
        (tmp_path / f"test_{name}.py").write_text(_USER_MODULE.format(index=index))
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DDPBENCH_TEST_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(tests_dir), str(tmp_path)]), GROUPS_TEST_OUT=str(out))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
                           "--no-loadscope-reorder", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0 and "9 passed" in proc.stdout, proc.stdout + proc.stderr
    started = sorted(path.name for path in out.glob("started-*"))
    workers = {path.name.rsplit("-", 1)[1] for path in out.glob("ran-*")}
    assert len(started) == 1 and len(list(out.glob("ran-*"))) == 6 and len(workers) == 1, (started, workers)
