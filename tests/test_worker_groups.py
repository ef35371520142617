"""The suite's parallel groups (tests/conftest.py): a test joins the worker of the resource it needs, whatever
else it uses, so a session-scoped cluster or cache is made once per run."""

from __future__ import annotations

from dataclasses import dataclass, field
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
