"""cluster=static: one ddpbench driver per node, in lockstep, on two hosts the test makes itself.

The two hosts are network namespaces joined by a veth pair (10.77.0.1 and 10.77.0.2), each
driver also in a UTS namespace of its own so that it has its own hostname (``ddpb-node0``,
``ddpb-node1``). Where namespaces cannot be made, the same tests run both drivers on loopback
(the hostnames are then the same and only the node ranks tell the nodes apart).
"""

from __future__ import annotations

import os
import shutil
import signal
import select
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Sequence

import pytest

from helpers.cli import assert_nothing_left, run_ddpbench, start_ddpbench, trials_in, wait_or_kill
from helpers.processes import wait_for

FAST = ["model=tiny", "stop.steps=30", "stop.warmup_steps=3"]
STATIC = ["cluster=static_2node", "cluster.rendezvous_timeout_s=10"]


@dataclass
class Host:
    """One test node: how to run a command there, its address and its hostname (None on loopback)."""

    prefix: List[str]
    address: str
    hostname: str | None
    env: dict


@dataclass
class Pair:
    hosts: List[Host]
    master_addr: str
    namespaces: bool


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)


def _make_netns_pair(tag: str) -> List[str] | None:
    """Create two namespaces joined by a veth pair; return their names, or None when that is impossible."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
        return None
    names = [f"ddpb{tag}a", f"ddpb{tag}b"]
    veths = [f"vd{tag}a", f"vd{tag}b"]
    steps = [
        ("netns", "add", names[0]), ("netns", "add", names[1]),
        ("link", "add", veths[0], "netns", names[0], "type", "veth", "peer", "name", veths[1], "netns", names[1]),
        ("-n", names[0], "addr", "add", "10.77.0.1/24", "dev", veths[0]),
        ("-n", names[1], "addr", "add", "10.77.0.2/24", "dev", veths[1]),
        ("-n", names[0], "link", "set", veths[0], "up"), ("-n", names[1], "link", "set", veths[1], "up"),
        ("-n", names[0], "link", "set", "lo", "up"), ("-n", names[1], "link", "set", "lo", "up"),
    ]
    for step in steps:
        if _ip(*step).returncode != 0:
            _delete_netns(names)
            return None
    probe = subprocess.run(["ip", "netns", "exec", names[1], "ping", "-c1", "-W2", "10.77.0.1"],
                           capture_output=True, timeout=20) if shutil.which("ping") else None
    if probe is not None and probe.returncode != 0:
        _delete_netns(names)
        return None
    return names


def _delete_netns(names: Sequence[str]) -> None:
    for name in names:
        _ip("netns", "del", name)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    tag = uuid.uuid4().hex[:6]
    names = _make_netns_pair(tag)
    if names is None:
        hosts = [Host([], "127.0.0.1", None, {}), Host([], "127.0.0.1", None, {})]
        yield Pair(hosts, "127.0.0.1", False)
        return
    hosts = []
    for rank, name in enumerate(names):
        hostname = f"ddpb-node{rank}"
        prefix = ["ip", "netns", "exec", name, "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname]
        # gloo picks its interface from the hostname, which resolves nowhere here: name the veth
        hosts.append(Host(prefix, f"10.77.0.{rank + 1}", hostname, {"GLOO_SOCKET_IFNAME": f"vd{tag}{'ab'[rank]}"}))
    try:
        yield Pair(hosts, "10.77.0.1", True)
    finally:
        _delete_netns(names)


def _start_nodes(pair: Pair, args: Sequence[str], cwds: Sequence[Path], logs: Path) -> List[subprocess.Popen]:
    """Both drivers at once, each with its cluster.node_rank, on its own host."""
    procs = []
    for rank, host in enumerate(pair.hosts):
        argv = [*args, f"cluster.node_rank={rank}", f"cluster.master_addr={pair.master_addr}"]
        procs.append(start_ddpbench(argv, cwds[rank], prefix=host.prefix, env=host.env, log=logs / f"driver{rank}.log"))
    return procs


def _log(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _hostnames(pair: Pair) -> List[str] | None:
    return [h.hostname for h in pair.hosts] if pair.namespaces else None  # type: ignore[misc]


#: a client on node 1 that connects to node 0's coordinator, never sends its line, and says when it was dropped
SILENT_CLIENT = """
import socket, sys, time
deadline = time.monotonic() + 60
while True:
    try:
        sock = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("never connected")
        time.sleep(0.1)
connected = time.monotonic()
sock.settimeout(120)
data = sock.recv(64)
print("dropped after %.1f s" % (time.monotonic() - connected) if data == b"" else "answered %r" % data, flush=True)
"""


@pytest.mark.slow
def test_two_drivers_paired_sweep_in_lockstep(pair: Pair, tmp_path: Path) -> None:
    from ddpbench.cluster.ports import derived_ports
    from ddpbench.cluster.static.coordinator import READ_TIMEOUT_S

    name = f"static-{uuid.uuid4().hex[:8]}"
    args = ["-m", "mode=native,traceml", "repeat=1", *FAST, *STATIC, f"sweep_name={name}"]
    procs = _start_nodes(pair, args, [tmp_path, tmp_path], tmp_path)
    port = derived_ports(f"{name}/coordinator", 1)[0]
    silent = subprocess.Popen([*pair.hosts[1].prefix, sys.executable, "-c", SILENT_CLIENT, pair.master_addr, str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        codes = [wait_or_kill(p, 150) for p in procs]
        said = silent.communicate(timeout=30)[0]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        if silent.poll() is None:
            silent.kill()
    output = "\n".join(f"--- driver{r} ---\n{_log(tmp_path / f'driver{r}.log')}" for r in range(2))
    assert codes == [0, 0], output
    dropped = float(said.split("dropped after ")[1].split(" s")[0]) if "dropped after " in said else None
    assert dropped is not None and 0 <= dropped < READ_TIMEOUT_S + 5, said  # a silent client holds no thread for long
    trials = trials_in(tmp_path / "outputs" / "multirun" / name)
    assert [(t["mode"], t["repeat"]) for t in trials] == [("native", 1), ("traceml", 1)], output
    for t in trials:
        assert t["status"] == "ok", (t["error"], output)
        assert t["world_size"] == 2
        assert [n["node_rank"] for n in t["nodes"]] == [0, 1]
        assert all(n["exit_code"] == 0 and n["wall_s"] > 0 for n in t["nodes"])
        assert t["wall_s"] >= max(n["wall_s"] for n in t["nodes"]) - 1e-6
        assert sorted(r["node_rank"] for r in t["ranks"]) == [0, 1]
        expected = _hostnames(pair)
        if expected is not None:  # each node named by its own host, in the node entries and the rank records
            assert [n["hostname"] for n in t["nodes"]] == expected
            assert [r["hostname"] for r in sorted(t["ranks"], key=lambda r: r["rank"])] == expected
    for t in trials:
        if t["mode"] == "traceml":
            assert t["traceml"] and t["traceml"]["steps_analyzed"], t["traceml"]
    # the same trial's ports on both nodes, and a different trial never shares them
    assert "node_done" in _log(tmp_path / "driver1.log")
    assert (tmp_path / "outputs" / "multirun" / name / "report.md").is_file()
    assert_nothing_left(name)


@pytest.mark.slow
def test_unshared_sweep_dirs_gather_rank_records(pair: Pair, tmp_path: Path) -> None:
    name = f"static-{uuid.uuid4().hex[:8]}"
    cwds = [tmp_path / "node0", tmp_path / "node1"]
    for cwd in cwds:
        cwd.mkdir()
    args = ["-m", "mode=native", "repeat=1", *FAST, *STATIC, "cluster.shared_dir=false", f"sweep_name={name}"]
    procs = _start_nodes(pair, args, cwds, tmp_path)
    codes = [wait_or_kill(p, 90) for p in procs]
    output = "\n".join(f"--- driver{r} ---\n{_log(tmp_path / f'driver{r}.log')}" for r in range(2))
    assert codes == [0, 0], output
    [trial] = trials_in(cwds[0] / "outputs" / "multirun" / name)
    assert trial["status"] == "ok", (trial["error"], output)
    assert trial["world_size"] == 2 and sorted(r["rank"] for r in trial["ranks"]) == [0, 1]
    node0, node1 = trial["nodes"]
    assert node0["node_rank"] == 0 and node0["wall_s"] > 0
    # node 1 seen only through its rank's record: host known, agent wall unknown
    assert node1["node_rank"] == 1 and node1["source"] == "ranks" and node1["wall_s"] is None
    assert node1["ranks_span_s"] > 0
    if pair.namespaces:
        assert [node0["hostname"], node1["hostname"]] == _hostnames(pair)
    assert trial["wall_s"] == pytest.approx(node0["wall_s"])
    assert not list((cwds[1] / "outputs" / "multirun" / name).glob("*/trial.json"))
    assert_nothing_left(name)


def test_the_coordinator_bounds_its_connections_and_drops_silent_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpbench.cluster.static import coordinator as static

    monkeypatch.setattr(static._Handler, "timeout", 1.0)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    coordinator = static.Coordinator("s", port, "127.0.0.1")
    silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(static.MAX_CONNECTIONS + 3)]
    try:
        refused: set = set()
        deadline = time.monotonic() + 0.5  # well inside the read timeout
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([s for s in silent if s not in refused], [], [], left)
            refused.update(readable)
        assert len(refused) == 3 and all(s.recv(1) == b"" for s in refused)  # beyond the bound: closed, unanswered
        assert all(s.recv(1) == b"" for s in silent)  # the others dropped after the read timeout
        coordinator.open(4)
        assert wait_for(lambda: _asked(port), 10, "an answer once the silent clients are gone")["trial"] == 4
    finally:
        for s in silent:
            s.close()
        coordinator.close()


def _asked(port: int) -> dict | None:
    from ddpbench.cluster.static.coordinator import ask_owner

    try:
        return ask_owner("127.0.0.1", port, "s", 1, 4)
    except (OSError, ValueError):
        return None


def test_a_node0_address_that_is_not_this_host_s_is_one_line() -> None:
    from ddpbench.cluster.static.coordinator import Coordinator
    from ddpbench.errors import ConfigError

    with pytest.raises(ConfigError, match="cluster.master_addr=192.0.2.1 is not an address of node 0"):
        Coordinator("s", 29999, "192.0.2.1")


def test_traceml_without_shared_dir_is_refused_before_the_sweep(tmp_path: Path) -> None:
    run = run_ddpbench(["-m", "mode=native,traceml", "repeat=1", *STATIC, "cluster.master_addr=10.0.0.1",
                        "cluster.shared_dir=false", "sweep_name=refused"], tmp_path, timeout=60)
    assert run.returncode == 2, run.output
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "shared_dir" in lines[0] and "logs-dir" in lines[0], run.output
    assert not list(tmp_path.glob("outputs/multirun/refused/*/trial.json"))


def test_static_needs_one_sweep_name_and_master_addr(tmp_path: Path) -> None:
    run = run_ddpbench(["-m", "mode=native", "repeat=1", *STATIC, "cluster.master_addr=10.0.0.1"], tmp_path, timeout=60)
    assert run.returncode == 2 and "sweep_name" in run.stderr, run.output
    run = run_ddpbench(["-m", "mode=native", "repeat=1", *STATIC, "sweep_name=x"], tmp_path, timeout=60)
    assert run.returncode == 2 and "cluster.master_addr" in run.stderr, run.output


@pytest.mark.slow
def test_second_node0_driver_is_refused_by_the_lock_naming_the_holder(tmp_path: Path) -> None:
    # both would serve node 0's coordinator on the same port: the lock must turn the second away first
    name = f"static-{uuid.uuid4().hex[:8]}"
    args = ["-m", "mode=native", "repeat=1", *FAST, *STATIC, "cluster.rendezvous_timeout_s=60", "cluster.node_rank=0",
            "cluster.master_addr=127.0.0.1", f"sweep_name={name}"]
    first = start_ddpbench(args, tmp_path, log=tmp_path / "first.log")
    try:
        # it holds the lock and serves the port
        wait_for(lambda: "ddpbench: sweep of" in _log(tmp_path / "first.log"), 60, "the first driver's sweep line",
                 alive=[first], details=lambda: _log(tmp_path / "first.log"), poll_s=0.2)
        second = run_ddpbench(args, tmp_path, timeout=60)
        assert first.poll() is None, _log(tmp_path / "first.log")  # still waiting for node 1
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert second.returncode == 2, second.output
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ddpbench: error: another driver is running this sweep"), second.output
    assert f"pid {first.pid}," in lines[0], lines[0]
    assert_nothing_left(name, grace_s=10)


@pytest.mark.slow
def test_node_killed_mid_trial_fails_that_trial_within_bound(pair: Pair, tmp_path: Path) -> None:
    name = f"static-{uuid.uuid4().hex[:8]}"
    # rank 1 (node 1) hangs at timed step 5 of every trial; rank 0 waits for it in the all-reduce
    args = ["-m", "mode=native", "repeat=1-2", *FAST, *STATIC, "fault.hang_at_step=5", "fault.rank=1",
            "trial.collective_timeout_s=30", "trial.timeout_s=120", f"sweep_name={name}"]
    procs = _start_nodes(pair, args, [tmp_path, tmp_path], tmp_path)
    sweep = tmp_path / "outputs" / "multirun" / name
    try:
        wait_for(lambda: any("fault: hang" in _log(p) for p in sweep.glob("*/attempts/*/logs/node1.stderr.log")), 60,
                 "node 1's hang", alive=procs, poll_s=0.2,
                 details=lambda: _log(tmp_path / "driver0.log") + _log(tmp_path / "driver1.log"))
        procs[1].send_signal(signal.SIGKILL)  # node 1's driver dies mid-trial; its guard takes its agent along
        killed_at = time.monotonic()
        first = next(sweep.glob("*/attempts/*/logs/node1.stderr.log")).parents[3] / "trial.json"
        wait_for(first.exists, 60, "the first trial's record after node 1's driver was killed",
                 details=lambda: _log(tmp_path / "driver0.log"), poll_s=0.2)
        first_after = time.monotonic() - killed_at
        code0 = wait_or_kill(procs[0], 90)
        finished_after = time.monotonic() - killed_at
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    output = _log(tmp_path / "driver0.log")
    assert code0 == 1, output
    trials = trials_in(sweep)
    assert [t["repeat"] for t in trials] == [1, 2] and [t["status"] for t in trials] == ["failed", "failed"], output
    # bound: peer death seen by gloo at once (else the 30 s collective timeout) + node 0's wait for
    # node 1's record (rendezvous timeout 10 s + 5 s) + teardown
    assert first_after < 30 + 15 + 10, first_after
    # the sweep went on: trial 2 found nobody to rendezvous with and failed within its bound too
    assert "node 0 exited" in trials[1]["error"] or "left no node record" in trials[1]["error"], trials[1]["error"]
    assert finished_after < first_after + 10 + 15 + 20, finished_after
    assert "[2/2]" in output
    assert_nothing_left(name)
