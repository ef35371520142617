"""A real 2-node Ray cluster for the tests: the module-scoped ``ray_cluster`` fixture.

tests/test_ray.py imports it, so the cluster runs while that module's tests do and no longer (idle, its
daemons still use CPU)::

    def test_x(ray_cluster):
        ...  # ray_cluster.address is HOST:PORT; RAY_ADDRESS is set for the module

``scripts/ray-local.sh start DIR`` runs once (a head with resource ``node0`` and a second node with ``node1``,
2 logical CPUs each), on a port found free, and ``stop`` runs after the module's last test. Without Ray
installed the tests skip, except in CI (``CI`` set), where Ray is part of ``[test]`` and they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ray-local.sh"
#: the GCS ports tried for the head, in order (each node's own ports follow it, ray-local.sh's layout)
CANDIDATE_PORTS = (6390, 6490, 6590, 6690)


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


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the Ray test cluster is needed in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    """Start the 2-node cluster once for the module; stop it (and everything of it) after its last test."""
    try:
        import ray  # noqa: F401
    except ImportError:
        _unavailable("ray is not installed (pip install 'ddpbench[ray]')")
    port = next((p for p in CANDIDATE_PORTS if all(_port_free(p + i) for i in (0, 10, 30))), None)
    if port is None:
        _unavailable(f"no free port for the Ray test cluster among {CANDIDATE_PORTS}")
    cluster_dir = Path(tempfile.mkdtemp(prefix="ddpb-ray-", dir="/tmp"))  # short: Ray's socket paths
    env = {**os.environ, "RAY_LOCAL_PORT": str(port), "RAY_LOCAL_RAY": str(Path(sys.executable).parent / "ray"),
           "RAY_LOCAL_TIMEOUT": "90"}
    cluster = RayCluster(f"127.0.0.1:{port}", cluster_dir, env)
    started = cluster.script("start", timeout=240)
    if started.returncode != 0:
        cluster.script("stop")
        pytest.fail(f"scripts/ray-local.sh start failed: {started.stderr.strip()[-500:]}")
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
