"""A real 2-node Ray cluster for the tests: the module-scoped ``ray_cluster`` fixture.

tests/test_ray.py imports it, so the cluster runs while that module's tests do and no longer (idle, its
daemons still use CPU)::

    def test_x(ray_cluster):
        ...  # ray_cluster.address is HOST:PORT; RAY_ADDRESS is set for the module

``scripts/ray-local.sh start DIR`` runs once (a head with resource ``node0`` and a second node with ``node1``,
2 logical CPUs each), on ports the script chooses and holds under its host-wide lock (``RAY_LOCAL_PORT=auto``),
and ``stop`` runs after the module's last test. A start that fails is one line (helpers.resources). Without Ray
installed the tests skip, except in CI (``CI`` set), where Ray is part of ``[test]`` and they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from helpers.resources import last_line, resource_failed

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ray-local.sh"


@dataclass
class RayCluster:
    """The running test cluster: its address and its ray-local.sh dir."""

    address: str
    cluster_dir: Path
    env: dict

    def script(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run ``scripts/ray-local.sh ARGS... DIR`` against this cluster."""
        return subprocess.run(["bash", str(SCRIPT), *args, str(self.cluster_dir)], env=self.env, text=True,
                              capture_output=True, timeout=timeout)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the Ray test cluster is needed in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def _node_logs(cluster_dir: Path) -> list[Path]:
    return [cluster_dir / "node0.log", cluster_dir / "node1.log"]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    """Start the 2-node cluster once for the module; stop it (and everything of it) after its last test."""
    try:
        import ray  # noqa: F401
    except ImportError:
        _unavailable("ray is not installed (pip install 'ddpbench[ray]')")
    cluster_dir = Path(tempfile.mkdtemp(prefix="ddpb-ray-", dir="/tmp"))  # short: Ray's socket paths
    env = {**os.environ, "RAY_LOCAL_PORT": "auto", "RAY_LOCAL_RAY": str(Path(sys.executable).parent / "ray"),
           "RAY_LOCAL_TIMEOUT": "90"}
    command = ["bash", str(SCRIPT), "start", str(cluster_dir)]
    try:
        started = subprocess.run(command, env=env, text=True, capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        RayCluster("", cluster_dir, env).script("stop")
        resource_failed("the Ray test cluster", command, "took over 300 s", _node_logs(cluster_dir))
    if started.returncode != 0:
        RayCluster("", cluster_dir, env).script("stop")
        resource_failed("the Ray test cluster", command, f"exited {started.returncode}: {last_line(started.stderr)}",
                        _node_logs(cluster_dir))
    cluster = RayCluster(f"127.0.0.1:{(cluster_dir / 'port').read_text().strip()}", cluster_dir, env)
    old = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = cluster.address
    try:
        yield cluster
    finally:
        if old is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = old
        stopped = cluster.script("stop")
        if stopped.returncode == 0:  # its logs stay for a look when the cluster would not stop
            shutil.rmtree(cluster_dir, ignore_errors=True)
