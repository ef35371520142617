"""The local 2-node SLURM cluster (scripts/slurm-local.sh) works for what ddpbench needs of it."""

from __future__ import annotations

import os
import subprocess
import sys
import shutil
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from ddpbench.cluster.slurm import wait as slurm_state
from helpers.processes import wait_for
from helpers.slurm import AUTO_PORTS, REPO, SCRIPT, SlurmCluster, available, script, slurm_cluster  # noqa: F401

JOB_TIMEOUT_S = 60.0


def _sbatch(cluster: SlurmCluster, *args: str, cwd: Path) -> str:
    proc = subprocess.run(
        ["sbatch", "--parsable", "-p", cluster.partition, *args],
        capture_output=True, text=True, env=cluster.env, cwd=cwd, timeout=30, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split(";")[0]


def _wait_state(job_id: str, want: set[str], timeout: float, env: dict[str, str]) -> str:
    def reached() -> str | None:
        state = slurm_state.job_state(job_id, env=env)
        return state if state in want else None
    return wait_for(reached, timeout, f"job {job_id} in {sorted(want)}",
                    details=lambda: f"state now: {slurm_state.job_state(job_id, env=env)}", poll_s=0.2)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}  # PID 1 here may not reap zombies


@pytest.mark.slurm
def test_sbatch_runs_on_both_nodes(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    assert os.environ["SLURM_CONF"] == str(slurm_cluster.conf_path)
    t0 = time.monotonic()
    job = _sbatch(
        slurm_cluster, "-N", "2", "--ntasks-per-node=1", "-o", str(tmp_path / "out-%j.txt"),
        # Single quotes: the variables must expand in each task, not once in the batch script on n1.
        "--wrap", "srun bash -c 'echo node=$SLURM_NODEID name=$SLURMD_NODENAME host=$(hostname)'",
        cwd=tmp_path,
    )
    state = slurm_state.wait_finished(job, timeout=JOB_TIMEOUT_S, poll=0.2, env=slurm_cluster.env)
    elapsed = time.monotonic() - t0
    out = (tmp_path / f"out-{job}.txt").read_text()
    assert state == "COMPLETED", out
    lines = sorted(ln for ln in out.splitlines() if ln.startswith("node="))
    assert [ln.split()[:2] for ln in lines] == [["node=0", "name=n1"], ["node=1", "name=n2"]], out
    assert elapsed < JOB_TIMEOUT_S


def _task_info() -> dict[str, str]:
    import os
    import socket

    return {
        "node_id": os.environ["SLURM_NODEID"],
        "proc_id": os.environ["SLURM_PROCID"],
        "node": os.environ["SLURMD_NODENAME"],
        "host": socket.gethostname(),
    }


@pytest.mark.slurm
def test_submitit_two_nodes(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    submitit = pytest.importorskip("submitit")
    import cloudpickle

    # The job's python cannot import this test module: ship the function by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        executor = submitit.AutoExecutor(folder=tmp_path / "submitit", cluster="slurm")
        executor.update_parameters(slurm_partition=slurm_cluster.partition, nodes=2, tasks_per_node=1,
                                   timeout_min=5)
        job = executor.submit(_task_info)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    # Bounded wait: submitit's own watcher relies on sacct, which this cluster lacks.
    try:
        wait_for(job.done, JOB_TIMEOUT_S, f"submitit job {job.job_id} done",
                 details=lambda: f"state {slurm_state.job_state(job.job_id)}; stderr: {job.stderr()}", poll_s=0.2)
    except AssertionError:
        job.cancel(check=False)
        raise
    results = job.results()
    assert sorted((r["node_id"], r["proc_id"], r["node"]) for r in results) == [
        ("0", "0", "n1"), ("1", "1", "n2")
    ]


@pytest.mark.slurm
def test_scancel_ends_job_and_is_detectable(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    job = _sbatch(slurm_cluster, "-o", str(tmp_path / "out.txt"),
                  "--wrap", f"echo $$ > {pid_file}; exec sleep 600", cwd=tmp_path)
    _wait_state(job, {"RUNNING"}, JOB_TIMEOUT_S, slurm_cluster.env)
    pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 10, "the job's pid file"))
    assert _alive(pid)
    assert not slurm_state.is_terminal(slurm_state.job_state(job, env=slurm_cluster.env))

    t0 = time.monotonic()
    subprocess.run(["scancel", job], env=slurm_cluster.env, check=True, timeout=30)
    state = slurm_state.wait_finished(job, timeout=30, poll=0.2, env=slurm_cluster.env)
    assert state == "CANCELLED"
    assert slurm_state.is_terminal(slurm_state.job_state(job, env=slurm_cluster.env))
    squeue = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True,
                            env=slurm_cluster.env, timeout=30, check=False)
    assert squeue.stdout.strip() in {"", "CANCELLED"}
    wait_for(lambda: not _alive(pid), 30 - (time.monotonic() - t0), f"the end of sleep (pid {pid}) after scancel",
             poll_s=0.1)


@pytest.mark.slurm
def test_job_state_unknown_job(slurm_cluster: SlurmCluster) -> None:
    assert slurm_state.job_state("987654321", env=slurm_cluster.env) is None
    assert slurm_state.is_terminal(None)
    with pytest.raises(ValueError):
        slurm_state.job_state("1; rm -rf /")


def _conf_ports(conf: Path) -> set[int]:
    """The ports a slurm.conf gives slurmctld and its two slurmd (``Port=[A-B]``)."""
    text = conf.read_text()
    ctld = {int(line.split("=", 1)[1]) for line in text.splitlines() if line.startswith("SlurmctldPort=")}
    nodes = [part.split("=", 1)[1].strip("[]").split("-") for part in text.split() if part.startswith("Port=")]
    return ctld | {port for first, last in nodes for port in range(int(first), int(last) + 1)}


@pytest.mark.slurm
def test_three_clusters_started_at_the_same_moment_get_their_own_ports_and_two_share_one_munged(tmp_path: Path) -> None:
    """Three starts in three folders, released together, on ports each chooses (``auto``): two with one munged
    socket no other cluster uses (both find no munged, one starts it, the other waits for it), the third with a
    socket of its own, so nothing but the host-wide port lock keeps it from choosing the same ports as the
    others. All three start, on distinct ports; each runs a job; stopping the two ends their munged."""
    available()
    sockets = [Path(f"/run/ddpbench-munge-{uuid.uuid4().hex[:8]}") / "munge.socket" for _ in range(2)]
    go = tmp_path / "go"
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    envs = [{**os.environ, **AUTO_PORTS, "SLURM_LOCAL_MUNGE_SOCKET": str(socket)}
            for socket in (sockets[0], sockets[0], sockets[1])]
    starts = [subprocess.Popen(["bash", "-c", f'until [ -e "{go}" ]; do sleep 0.01; done; exec bash "{SCRIPT}" start "{d}"'],
                               env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
              for d, env in zip(dirs, envs)]
    try:
        go.touch()
        outputs = [start.communicate(timeout=180) for start in starts]
        assert [start.returncode for start in starts] == [0, 0, 0], outputs
        ports = [_conf_ports(d / "slurm.conf") for d in dirs]
        assert all(len(p) == 3 for p in ports) and not (ports[0] & ports[1] or ports[0] & ports[2] or ports[1] & ports[2]), ports
        assert sum((d / "run" / "munged.ours").is_file() for d in dirs[:2]) == 1, outputs  # one munged, started once
        for d, env in zip(dirs, envs):
            job = subprocess.run(["srun", "-N", "2", "hostname"], env={**env, "SLURM_CONF": str(d / "slurm.conf")},
                                 capture_output=True, text=True, timeout=60)
            assert job.returncode == 0 and len(job.stdout.split()) == 2, (job.stdout, job.stderr)
        munged = int((sockets[0].parent / "munge.socket.pid").read_text())
    finally:
        for start in starts:
            if start.poll() is None:
                start.kill()
        stops = [script("stop", str(d), env=env, timeout=120) for d, env in zip(dirs, envs)]
        for socket in sockets:
            shutil.rmtree(socket.parent, ignore_errors=True)
    assert [stop.returncode for stop in stops] == [0, 0, 0], [stop.stderr for stop in stops]
    assert not _alive(munged)  # the second stop ended the munged the first handed over


_FIXTURE_USER = textwrap.dedent(
    """
    from helpers.slurm import slurm_cluster  # noqa: F401

    def test_needs_cluster(slurm_cluster):
        pass
    """
)


@pytest.mark.parametrize("ci, outcome", [("true", "error"), ("", "skipped")])
def test_fixture_without_sbatch(tmp_path: Path, ci: str, outcome: str) -> None:
    """No sbatch on PATH: an error (not a skip) under CI=true, a one-line skip otherwise."""
    (tmp_path / "test_user.py").write_text(_FIXTURE_USER)
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "SLURM_CONF", "PYTEST_ADDOPTS"}}
    env.update(PATH=str(tmp_path / "empty-bin"), PYTHONPATH=str(REPO / "tests"), CI=ci)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         "test_user.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    out = proc.stdout + proc.stderr
    if outcome == "error":
        assert proc.returncode == 1, out
        assert "1 error" in out and "skipped" not in out, out
        assert "sbatch not found" in out, out
    else:
        assert proc.returncode == 0, out
        assert "1 skipped" in out and "sbatch not found" in out, out


_TWO_USERS = textwrap.dedent(
    """
    from helpers.slurm import slurm_cluster  # noqa: F401

    def test_one(slurm_cluster):
        pass

    def test_two(slurm_cluster):
        pass
    """
)


@pytest.mark.slurm
def test_a_cluster_that_does_not_start_is_one_line_naming_it_in_every_test_that_needs_it(tmp_path: Path) -> None:
    """The start fails (a DIR the script refuses): each test that needs the cluster errors with the same one line,
    which names the resource, the command and how it ended; the start is tried once."""
    available()
    (tmp_path / "test_user.py").write_text(_TWO_USERS)
    bad_dir = tmp_path / "with space"
    env = {k: v for k, v in os.environ.items() if k not in {"SLURM_CONF", "PYTEST_ADDOPTS"}}
    env.update(PYTHONPATH=str(REPO / "tests"), CI="true", DDPBENCH_SLURM_DIR=str(bad_dir))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           "test_user.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "2 errors" in out, out
    lines = [line for line in out.splitlines() if "the SLURM test cluster did not start" in line]
    assert len(lines) == 4, out  # each error's E line and its summary line
    assert "slurm-local.sh start" in lines[0] and "exited 1" in lines[0] and "whitespace" in lines[0], lines[0]
    assert "Traceback" not in out, out
