"""A real 2-node SLURM cluster for the tests: the session-scoped ``slurm_cluster`` fixture.

Use it from a test module or a conftest::

    from helpers.slurm import slurm_cluster  # noqa: F401  (re-export the fixture)

    @pytest.mark.slurm
    def test_x(slurm_cluster):
        subprocess.run(["sbatch", ...], env=slurm_cluster.env)

(``tests/`` is on ``sys.path``: pytest puts the folder of the top conftest there).

Behaviour:
- ``sbatch`` missing, or not root: under ``CI=true`` the tests fail (error) with one line; otherwise they
  skip with a one-line reason.
- Otherwise the cluster is started with ``scripts/slurm-local.sh start DIR`` in a fresh temporary DIR
  on ports the script chooses under its host-wide port lock (``auto``: free, and never the ports of another
  start at the same moment), ``os.environ["SLURM_CONF"]`` is set for the session, and the cluster is
  stopped when the session ends. DIR is removed afterwards unless
  a test failed (its logs are then kept and their path printed) or ``DDPBENCH_SLURM_KEEP=1``.
- ``DDPBENCH_SLURM_DIR=/some/dir``: use that DIR instead; a cluster already running there is reused and
  left running.
- A start failure is always a test error (never a skip), in one line (helpers.resources): the command, its
  last line, the last line of the cluster's newest log.

One cluster per session, however many modules import the fixture: it lives on ``config.stash``. Under
``pytest -n N`` every test that uses it runs on one worker (tests/conftest.py groups them).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.resources import last_line, resource_failed

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "slurm-local.sh"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 120.0


@dataclasses.dataclass(frozen=True)
class SlurmCluster:
    """A running local cluster. ``env``: ``os.environ`` plus ``SLURM_CONF``, for subprocesses."""

    dir: Path
    conf_path: Path
    nodes: tuple[str, ...]
    partition: str
    env: dict[str, str]
    started_here: bool

    @property
    def log_dir(self) -> Path:
        return self.dir / "log"


_KEY = pytest.StashKey["SlurmCluster | BaseException"]()


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _unavailable(reason: str) -> None:
    """Skip outside CI, fail under CI=true. Raises."""
    if in_ci():
        pytest.fail(f"SLURM test cluster unavailable under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


#: the script's environment for ports it chooses itself, free and reserved (scripts/slurm-local.sh)
AUTO_PORTS = {"SLURM_LOCAL_CTLD_PORT": "auto", "SLURM_LOCAL_NODE_PORT": "auto"}


def available() -> None:
    """Skip (fail under CI=true) unless this machine can start a local cluster: sbatch installed, root."""
    if shutil.which("sbatch") is None:
        _unavailable("sbatch not found (install SLURM: sudo scripts/slurm-local.sh install)")
    if os.geteuid() != 0:
        _unavailable("the local SLURM cluster needs root (scripts/slurm-local.sh starts daemons)")


def script(*args: str, env: dict[str, str] | None = None, timeout: float) -> subprocess.CompletedProcess[str]:
    """``scripts/slurm-local.sh ARGS...``, its output captured."""
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _start(config: pytest.Config) -> SlurmCluster:
    available()
    fixed = os.environ.get("DDPBENCH_SLURM_DIR")
    if fixed:
        cluster_dir = Path(fixed).resolve()
        if script("status", str(cluster_dir), timeout=30).returncode == 0:
            return _cluster(cluster_dir, started_here=False)
        env = dict(os.environ)
    else:
        cluster_dir = Path(tempfile.mkdtemp(prefix="ddpbench-slurm-", dir="/tmp"))
        env = {**os.environ, **AUTO_PORTS}

    command = ["bash", str(SCRIPT), "start", str(cluster_dir)]
    try:
        proc = script("start", str(cluster_dir), env=env, timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        script("stop", str(cluster_dir), timeout=STOP_TIMEOUT_S)
        resource_failed("the SLURM test cluster", command, f"took over {START_TIMEOUT_S:g} s", [cluster_dir / "log"])
    if proc.returncode != 0:
        resource_failed("the SLURM test cluster", command, f"exited {proc.returncode}: {last_line(proc.stderr)}",
                        [cluster_dir / "log"])
    return _cluster(cluster_dir, started_here=True)


def _cluster(cluster_dir: Path, *, started_here: bool) -> SlurmCluster:
    conf = cluster_dir / "slurm.conf"
    return SlurmCluster(
        dir=cluster_dir,
        conf_path=conf,
        nodes=("n1", "n2"),
        partition="debug",
        env={**os.environ, "SLURM_CONF": str(conf)},
        started_here=started_here,
    )


def _stop(cluster: SlurmCluster, session: pytest.Session, old_conf: str | None) -> None:
    if old_conf is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old_conf
    if not cluster.started_here:
        return
    try:
        proc = script("stop", str(cluster.dir), timeout=STOP_TIMEOUT_S)
        ok = proc.returncode == 0
        if not ok:
            sys.stderr.write(f"\nslurm-local stop failed: {last_line(proc.stderr)}\n")
    except subprocess.TimeoutExpired:
        ok = False
        sys.stderr.write(f"\nslurm-local stop took over {STOP_TIMEOUT_S:g} s\n")
    keep = os.environ.get("DDPBENCH_SLURM_KEEP") == "1" or session.testsfailed or not ok
    if os.environ.get("DDPBENCH_SLURM_DIR"):
        return
    if keep:
        sys.stderr.write(f"\nSLURM test cluster files kept in {cluster.dir}\n")
    else:
        shutil.rmtree(cluster.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_cluster(request: pytest.FixtureRequest) -> Iterator[SlurmCluster]:
    """A running 2-node SLURM cluster (nodes n1, n2; partition debug); SLURM_CONF set in os.environ."""
    config = request.config
    cached = config.stash.get(_KEY, None)
    if cached is None:
        old_conf = os.environ.get("SLURM_CONF")
        try:
            cached = _start(config)
        except BaseException as exc:  # skip/fail outcomes too: one attempt per session
            cached = exc
        config.stash[_KEY] = cached
        if isinstance(cached, SlurmCluster):
            os.environ["SLURM_CONF"] = str(cached.conf_path)
            cluster = cached
            config.add_cleanup(lambda: _stop(cluster, request.session, old_conf))
    if isinstance(cached, BaseException):
        raise cached
    yield cached
