"""Session checks shared by every test module."""

from __future__ import annotations

import copy
import fcntl
import os
import tempfile
import time
from pathlib import Path
from typing import IO, Iterator, List

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


# --- parallel runs (pytest -n N): which tests share a worker, which run alone ---

#: the worker group of the quiet tests that need no shared fixture
QUIET_GROUP = "quiet"

#: the worker group of each shared resource, by the fixture that gives it. A session fixture is made once per
#: worker, so every test that needs one resource must run on one worker, or the run starts it twice (two
#: SLURM clusters, two caches of tool environments). The first resource a test needs, in this order, decides.
RESOURCE_GROUPS = {
    "slurm_cluster": "slurm",
    "ray_cluster": "ray",
    "env_cache": "tool-environments",
    "downloads": "tool-environments",
}
#: the worker group of the tests a marker says need a resource, with or without its fixture
MARKER_GROUPS = {"slurm": "slurm"}


def worker_group(item: pytest.Item) -> str | None:
    """The worker group a test runs in, by what it needs: its resource (:data:`RESOURCE_GROUPS`, then
    :data:`MARKER_GROUPS`), else its other session-scoped fixture, else its module when a module-scoped fixture
    is shared, else the quiet group for a quiet test; None when it can run anywhere."""
    needs = set(getattr(item, "fixturenames", ()))
    for fixture, group in RESOURCE_GROUPS.items():
        if fixture in needs:
            return group
    for marker, group in MARKER_GROUPS.items():
        if item.get_closest_marker(marker):
            return group
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    scoped = sorted((fixture_defs[-1].scope, name) for name, fixture_defs in defs.items()
                    if fixture_defs and fixture_defs[-1].scope in ("session", "module") and name != "tmp_path_factory"
                    and not name.startswith(("_", "worker_id", "testrun_uid")))
    sessions = [name for scope, name in scoped if scope == "session"]
    if sessions:
        return sessions[0]
    if scoped:
        return item.module.__name__ if item.module else item.nodeid
    if item.get_closest_marker("quiet"):
        return QUIET_GROUP
    return None


#: the worker group a test was given at collection (:func:`worker_group`), on the test itself
GROUP_KEY = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """The controller of a parallel run names the file its workers write their groups to (helpers.scheduling)."""
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        from helpers.scheduling import new_groups_file

        path = new_groups_file()
        config.add_cleanup(lambda: path.unlink(missing_ok=True))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` (the suite's default): the suite's own group scheduler, which does not depend on
    pytest-xdist's node-id suffix (helpers.scheduling says why)."""
    from helpers.scheduling import GROUPS_FILE_ENV, ResourceGroupScheduling

    if config.getvalue("dist") != "loadgroup" or GROUPS_FILE_ENV not in os.environ:
        return None
    return ResourceGroupScheduling(config, log, Path(os.environ[GROUPS_FILE_ENV]))


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Each test joins the worker group of what it needs (:func:`worker_group`); on a worker of a parallel run,
    the tests are put in the order they are handed out and the groups are written for the controller."""
    for item in items:
        group = worker_group(item)
        if group is not None:
            item.stash[GROUP_KEY] = group
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from helpers.scheduling import GROUPS_FILE_ENV, write_groups

        _schedule_order(items)
        if GROUPS_FILE_ENV in os.environ:
            write_groups({item.nodeid: item.stash[GROUP_KEY] for item in items if GROUP_KEY in item.stash})


def _schedule_order(items: List[pytest.Item]) -> None:
    """The order the tests are handed out in (the scheduler keeps the collection's order): the quiet tests first,
    as one unit, so the machine is kept to itself once and not drained before each of them; then the groups and
    tests that launch real processes, largest first, so the run does not end on one long unit while the other
    workers idle; then the rest. A group's tests stay together and in order."""
    def unit(item: pytest.Item) -> str:
        return item.stash.get(GROUP_KEY, item.nodeid)

    quiet = {unit(item) for item in items if item.get_closest_marker("quiet")}
    slow = {unit(item) for item in items if item.get_closest_marker("slow") or item.get_closest_marker("slurm")}
    first: dict[str, int] = {}
    size: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(unit(item), index)
        size[unit(item)] = size.get(unit(item), 0) + 1
    items.sort(key=lambda item: (unit(item) not in quiet, unit(item) not in slow, -size[unit(item)], first[unit(item)]))


def _run_lock_paths() -> tuple[Path, Path] | None:
    """The two lock files the workers of one ``pytest -n N`` run share; None when the run is not parallel."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return None
    base = Path(tempfile.gettempdir()) / f"ddpbench-tests-{run}"
    return base.with_suffix(".gate"), base.with_suffix(".run")


def _quiet_done_path() -> Path | None:
    """The file the worker of the quiet tests writes when they are over (parallel runs only)."""
    paths = _run_lock_paths()
    return paths[0].with_suffix(".quiet-done") if paths else None


#: whether this run's selection holds a quiet test (set once collection, deselection included, is over)
_quiet_selected: list[bool] = []
#: seconds a test waits for the quiet tests to end before it starts anyway (their worker may have died)
QUIET_FIRST_BOUND_S = 900.0


def pytest_collection_finish(session: pytest.Session) -> None:
    _quiet_selected[:] = [any(item.get_closest_marker("quiet") for item in session.items)]


def _wait_for_the_quiet_tests() -> None:
    """Before a parallel run's first other test: wait until the quiet tests (scheduled first) are over, so they
    start on an idle machine instead of waiting for the tests already running to drain."""
    done = _quiet_done_path()
    if done is None or not _quiet_selected or not _quiet_selected[0]:
        return
    deadline = time.monotonic() + QUIET_FIRST_BOUND_S
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    _quiet_selected[:] = [False]


#: the lock files of this worker while it holds the machine for consecutive quiet tests
_held_quiet: list[IO[str]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A ``quiet`` test (it measures time or CPU) runs with no other test running; the others run side by side.

    A readers-writer lock over the parallel run's workers, the writer first: a quiet test closes the gate
    (no test starts after it), waits for the running ones to end, and holds the machine to itself, on to the
    end of the next test when that one is quiet too. The quiet tests are handed out first, and the other
    workers' first tests wait for them to end, so no running test has to drain before they start.
    """
    paths = _run_lock_paths()
    if paths is None:
        yield
        return
    quiet = item.get_closest_marker("quiet") is not None
    if not quiet:
        _wait_for_the_quiet_tests()
    if quiet and _held_quiet:
        files = list(_held_quiet)
        _held_quiet.clear()
    else:
        files = [open(path, "a") for path in paths]
        gate, run = files
        if quiet:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(run, fcntl.LOCK_EX)
        else:
            fcntl.flock(gate, fcntl.LOCK_SH)
            fcntl.flock(run, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
    try:
        yield
    finally:
        if quiet and nextitem is not None and nextitem.get_closest_marker("quiet") is not None:
            _held_quiet.extend(files)
        else:
            for file in files:
                file.close()
            done = _quiet_done_path()
            if quiet and done is not None:
                done.touch()
