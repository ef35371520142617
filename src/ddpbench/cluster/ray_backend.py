"""Ray backend (``cluster.kind: ray``): a trial's node agents as Ray actors on a running Ray cluster.

The driver (this host) runs each trial as ONE agent, ``python -m ddpbench.cluster.ray_backend`` (the
"trial process", :func:`main`), which

1. connects to the cluster (``cluster.ray.address``; ``auto`` = ``$RAY_ADDRESS``, else the cluster
   ``ray start`` left on this host);
2. reserves one bundle per node in a placement group (``STRICT_SPREAD`` when ``cluster.nnodes`` > 1, so
   every node agent gets a Ray node of its own), waiting at most ``cluster.ray.placement_timeout_s``;
3. starts one :class:`NodeAgent` actor in each bundle; each runs the mode's node command (torchrun,
   ``traceml run``, a wrapper) under a keeper and ddpbench's guard (:mod:`ddpbench.cluster.ray_node`), with the node rank (``NODE_RANK_TOKEN``) and the
   rendezvous address (``MASTER_ADDR_TOKEN``: bundle 0's node) filled in;
4. waits for them; a lost node or a killed actor ends the trial at once (the other actors are killed),
   with one line on stderr; it writes the other nodes' ``nodes/node<r>.json`` for node 0's trial record;
5. removes the placement group on every exit, SIGTERM and Ctrl-C included. The guard under each actor ends
   its command when the actor's worker dies, so nothing outlives the trial on any node; when
   this process is killed outright, Ray kills its actors (they fate-share with their owner).

Every node writes its logs and rank records into the sweep dir, so the nodes must share it
(``cluster.shared_dir: true``: NFS, EFS, or one machine such as ``scripts/ray-local.sh``'s cluster).
Ray is imported only here and only when ``cluster.kind: ray`` is used (``pip install 'ddpbench[ray]'``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ddpbench.cluster.base import NODE_RANK_TOKEN, Backend, NodePlan, TrialSlot, register
from ddpbench.cluster.ports import derived_ports
from ddpbench.config import DdpbenchConfig
from ddpbench.errors import ConfigError, DdpbenchError, ToolMissingError

#: stands for the rendezvous address in a trial's node command; the trial process fills in bundle 0's node
MASTER_ADDR_TOKEN = "@DDPBENCH_RAY_MASTER_ADDR@"
#: the file ``ray start --head`` leaves with the address of the cluster it started on this host
RAY_CURRENT_CLUSTER = Path("/tmp/ray/ray_current_cluster")
#: seconds between the trial process's checks of its actors
POLL_S = 0.5
#: seconds the trial process waits for Ray to remove its placement group (removal is asynchronous)
REMOVE_WAIT_S = 30.0


# --------------------------------------------------------------------------- the driver side (registry)


def resolve_address(address: str, env: Optional[Dict[str, str]] = None) -> str:
    """HOST:PORT of the cluster ``address`` names (``auto``: ``$RAY_ADDRESS``, else ``ray start``'s file)."""
    e = os.environ if env is None else env
    value = str(address).strip()
    if value == "auto":
        value = str(e.get("RAY_ADDRESS") or "").strip()
        if not value and RAY_CURRENT_CLUSTER.is_file():
            value = RAY_CURRENT_CLUSTER.read_text().strip()
        if not value:
            raise ConfigError("cluster.ray.address=auto: RAY_ADDRESS is not set and no Ray cluster was started on "
                              "this host (start one and set it: eval \"$(scripts/ray-local.sh start)\"; or set "
                              "cluster.ray.address=HOST:PORT)")
    if value.startswith("ray://"):
        raise ConfigError(f"cluster.ray.address={value}: Ray Client addresses are not supported; give the GCS "
                          "address HOST:PORT (run ddpbench on a node of the cluster)")
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"cluster.ray.address={value!r}: must be HOST:PORT (a Ray cluster's GCS address) or auto")
    return value


def check_answers(address: str, timeout_s: float) -> None:
    """Raise DdpbenchError (one line) when nothing listens at ``address`` within ``timeout_s`` seconds."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as error:
        raise DdpbenchError(f"cluster.kind=ray: the Ray cluster at {address} does not answer "
                            f"({error.strerror or error}); start it (eval \"$(scripts/ray-local.sh start)\") or fix "
                            "cluster.ray.address") from None


def bundles(cfg: DdpbenchConfig) -> List[Dict[str, float]]:
    """One placement-group bundle per node rank: its CPUs, its GPUs (cuda) and ``node_resources[r]``."""
    c = cfg.cluster
    cpus = float(c.ray.cpus_per_node) if c.ray.cpus_per_node is not None else float(c.nproc_per_node)
    out = []
    for node_rank in range(int(c.nnodes)):
        bundle: Dict[str, float] = {"CPU": cpus}
        if str(c.device) == "cuda":
            bundle["GPU"] = float(c.nproc_per_node)
        if node_rank < len(c.ray.node_resources):
            bundle.update({str(k): float(v) for k, v in dict(c.ray.node_resources[node_rank]).items()})
        out.append(bundle)
    return out


def places_itself(cfg: DdpbenchConfig) -> bool:
    """Whether the workload's own driver places its workers on the cluster (workload=ray_train: Ray Train does)."""
    return cfg.workload.trains is not None


class RayBackend(Backend):
    """One agent per trial on this host, the trial process, which places one actor per node on the Ray cluster."""

    kind = "ray"

    def validate(self, cfg: DdpbenchConfig) -> None:
        c = cfg.cluster
        if not c.shared_dir:
            raise ConfigError("cluster.shared_dir=false with cluster.kind=ray: every node writes its logs and rank "
                              "records into the sweep dir, so the Ray nodes must share it (set shared_dir=true)")
        if len(c.ray.node_resources) > int(c.nnodes):
            raise ConfigError(f"cluster.ray.node_resources: {len(c.ray.node_resources)} entries for "
                              f"cluster.nnodes={c.nnodes}; give at most one per node")
        for node_rank, extra in enumerate(c.ray.node_resources):
            bad = [k for k, v in dict(extra).items() if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0]
            if bad:
                raise ConfigError(f"cluster.ray.node_resources[{node_rank}].{bad[0]}: must be a number >= 0 (a Ray "
                                  "resource amount)")
        if float(c.ray.placement_timeout_s) <= 0 or float(c.ray.connect_timeout_s) <= 0:
            raise ConfigError("cluster.ray.placement_timeout_s and connect_timeout_s must be > 0")
        resolve_address(str(c.ray.address))

    def prepare_sweep(self, cfg: DdpbenchConfig) -> None:
        check_answers(resolve_address(str(cfg.cluster.ray.address)), float(cfg.cluster.ray.connect_timeout_s))
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ToolMissingError("cluster.kind=ray needs Ray: pip install 'ddpbench[ray]'") from None

    def plan(self, cfg: DdpbenchConfig, job: TrialSlot, timeout_s: float) -> NodePlan:
        token = uuid.uuid4().hex[:8]
        master_port, aggregator_port = derived_ports(f"ray-{token}", 2, int(cfg.cluster.base_port))
        if places_itself(cfg):  # Ray Train places its workers: one driver here; the nodes are known from the ranks
            return NodePlan(node_ranks=[0], master_addr="127.0.0.1", master_port=master_port,
                            aggregator_port=aggregator_port, owner=True, retry_on_port_clash=False, run_token=token,
                            peer_records=False)
        return NodePlan(node_ranks=[0], master_addr=MASTER_ADDR_TOKEN, master_port=master_port,
                        aggregator_port=aggregator_port, owner=True, retry_on_port_clash=True, run_token=token,
                        peer_record_wait_s=10.0, agent_spans_nodes=True)

    def wrap_agent(self, cfg: DdpbenchConfig, plan: NodePlan, argv: List[str], attempt_dir: Path) -> List[str]:
        if places_itself(cfg):
            return argv
        spec = {"address": resolve_address(str(cfg.cluster.ray.address)), "bundles": bundles(cfg),
                "placement_timeout_s": float(cfg.cluster.ray.placement_timeout_s),
                "name": f"ddpbench-{plan.run_token}"}
        return [sys.executable, "-m", "ddpbench.cluster.ray_backend", "--job-dir", str(attempt_dir),
                "--spec", json.dumps(spec), "--", *argv]


register(RayBackend())


# --------------------------------------------------------------------------- the trial process


def _fill(text: str, node_rank: int, master_addr: str) -> str:
    return text.replace(NODE_RANK_TOKEN, str(node_rank)).replace(MASTER_ADDR_TOKEN, master_addr)


class TrialProcess:
    """One trial on the Ray cluster: the placement group, one actor per node, their results."""

    def __init__(self, job_dir: Path, spec: Dict[str, Any], command: List[str]) -> None:
        self.job_dir = job_dir
        self.spec = spec
        self.command = command
        self.pg: Any = None
        self.actors: List[Any] = []

    def node_log(self, node_rank: int, stream: str) -> Path:
        from ddpbench.formats.trial_record import node_log_path

        logs = self.job_dir / "logs"
        if node_rank == 0:  # node 0's own logs are this process's output: its actor writes beside them
            return logs / f".ray-node0.{stream}.log"
        return node_log_path(logs, node_rank, stream)

    def place(self) -> str:
        """Reserve the bundles (bounded); node 0's address."""
        import ray
        from ray.util.placement_group import placement_group, placement_group_table

        bundle_list = self.spec["bundles"]
        strategy = "STRICT_SPREAD" if len(bundle_list) > 1 else "PACK"
        self.pg = placement_group(bundle_list, strategy=strategy, name=self.spec["name"])
        wait_s = float(self.spec["placement_timeout_s"])
        try:
            ray.get(self.pg.ready(), timeout=wait_s)
        except ray.exceptions.GetTimeoutError:
            raise DdpbenchError(f"no Ray nodes offer the trial's resources ({bundle_list}, {strategy}) "
                                f" within {wait_s:g} s (cluster.ray.placement_timeout_s)") from None
        node_id = placement_group_table(self.pg)["bundles_to_node_id"][0]
        for node in ray.nodes():
            if node["NodeID"] == node_id:
                return str(node["NodeManagerAddress"])
        raise DdpbenchError(f"the node of bundle 0 ({node_id}) left the Ray cluster before the trial started")

    def start(self, master_addr: str) -> List[Any]:
        """One actor per bundle, each running its node's command; their result refs."""
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from ddpbench.cluster.ray_node import NodeAgent  # by reference: each node imports it

        # max_concurrency=2: stop() runs while run() waits; Ray's stubs type remote() for functions only
        agent: Any = ray.remote(max_restarts=0, max_concurrency=2)(NodeAgent)  # type: ignore[call-overload]
        refs = []
        for node_rank, bundle in enumerate(self.spec["bundles"]):
            resources = {k: v for k, v in bundle.items() if k not in ("CPU", "GPU")}
            actor = agent.options(
                num_cpus=bundle.get("CPU", 0), num_gpus=bundle.get("GPU", 0), resources=resources,
                scheduling_strategy=PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=node_rank),
            ).remote()
            self.actors.append(actor)
            argv = [_fill(arg, node_rank, master_addr) for arg in self.command]
            env = {k: _fill(v, node_rank, master_addr) for k, v in os.environ.items()}
            refs.append(actor.run.remote(argv, env, os.getcwd(), str(self.node_log(node_rank, "stdout")),
                                         str(self.node_log(node_rank, "stderr"))))
        return refs

    def wait(self, refs: List[Any]) -> Tuple[Dict[int, Dict[str, Any]], Optional[str]]:
        """Every node's result; the first failure (lost node, killed actor, failed command) ends the wait."""
        import ray

        results: Dict[int, Dict[str, Any]] = {}
        pending = {ref: rank for rank, ref in enumerate(refs)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for ref in done:
                rank = pending.pop(ref)
                try:
                    results[rank] = ray.get(ref)
                except ray.exceptions.RayError as error:
                    return results, f"node {rank}'s Ray actor died ({type(error).__name__}): {_first_line(error)}"
                if results[rank]["exit_code"] != 0 and pending:  # the others cannot finish without it: stop them
                    return results, f"node {rank} exited with {results[rank]['exit_code']}; the other nodes were stopped"
        return results, None

    def close(self) -> None:
        """Kill the actors (their guards take the commands with them) and remove the placement group."""
        try:
            import ray
            from ray.util.placement_group import remove_placement_group

            from ddpbench.cluster.ray_node import STOP_GRACE_S

            stops = [actor.stop.remote(STOP_GRACE_S) for actor in self.actors]
            if stops:  # a lost node's actor never answers: bounded
                ray.wait(stops, num_returns=len(stops), timeout=STOP_GRACE_S + 2.0)
            for actor in self.actors:
                try:
                    ray.kill(actor)
                except Exception:  # an actor already gone
                    pass
            if self.pg is not None:
                remove_placement_group(self.pg)
                _wait_removed(self.pg, REMOVE_WAIT_S)
                self.pg = None
        except Exception as error:  # the cluster went away: Ray frees a dead driver's group itself
            print(f"ddpbench: ray: cleanup: {_first_line(error)}", file=sys.stderr, flush=True)


def _wait_removed(pg: Any, bound_s: float) -> None:
    """Return once Ray lists ``pg`` as REMOVED (removal is asynchronous), or after ``bound_s`` seconds with one
    line on stderr: a trial's placement group never outlives its trial process unseen."""
    from ray.util.placement_group import placement_group_table

    deadline = time.monotonic() + bound_s
    state = placement_group_table(pg).get("state")
    while state != "REMOVED":
        if time.monotonic() > deadline:
            print(f"ddpbench: ray: cleanup: placement group {pg.id.hex()} still {state} after {bound_s:g} s",
                  file=sys.stderr, flush=True)
            return
        time.sleep(0.05)
        state = placement_group_table(pg).get("state")


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(error).__name__


def _write_peer_records(trial: TrialProcess, results: Dict[int, Dict[str, Any]], nnodes: int,
                        error: Optional[str], started: float) -> None:
    from ddpbench.formats.trial_record import node_entry, node_record_path
    from ddpbench.io import write_json_atomic

    now = time.time()
    for node_rank in range(1, nnodes):
        got = results.get(node_rank)
        if got is not None:
            entry = node_entry(node_rank, got["hostname"], wall_s=got["wall_s"], exit_code=got["exit_code"],
                               spawn_epoch=got["spawn_epoch"], exit_epoch=got["exit_epoch"],
                               stdout=str(trial.node_log(node_rank, "stdout")),
                               stderr=str(trial.node_log(node_rank, "stderr")))
        else:
            entry = node_entry(node_rank, "unknown", wall_s=now - started, exit_code=None, spawn_epoch=started,
                               exit_epoch=now, error=error or "stopped: another node of the trial failed",
                               stdout=str(trial.node_log(node_rank, "stdout")),
                               stderr=str(trial.node_log(node_rank, "stderr")))
        write_json_atomic(node_record_path(trial.job_dir, node_rank), entry)


def _copy_node0_output(trial: TrialProcess) -> None:
    for stream, sink in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        path = trial.node_log(0, stream)
        if path.is_file():
            sink.write(path.read_text(errors="replace"))
            sink.flush()


def main(argv: Optional[List[str]] = None) -> int:
    """The trial process: place, run and wait for every node agent of one trial; its exit code is node 0's.

    """
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m ddpbench.cluster.ray_backend")
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(args_in)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    spec = json.loads(args.spec)
    trial = TrialProcess(Path(args.job_dir), spec, command)

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    started = time.time()
    results: Dict[int, Dict[str, Any]] = {}
    error: Optional[str] = None
    try:
        import ray

        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        ray.init(address=spec["address"], log_to_driver=False, logging_level=logging.ERROR,
                 configure_logging=True, include_dashboard=False)
        master_addr = trial.place()
        results, error = trial.wait(trial.start(master_addr))
    except KeyboardInterrupt as stopped:
        error = f"stopped by {stopped}"
    except DdpbenchError as failed:
        error = str(failed)
    except Exception as failed:  # a Ray error outside the actors' results: one line, no traceback
        error = f"ray: {type(failed).__name__}: {_first_line(failed)}"
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):  # a second signal must not cut the cleanup short
            signal.signal(signum, signal.SIG_IGN)
        trial.close()
    _write_peer_records(trial, results, len(spec["bundles"]), error, started)
    _copy_node0_output(trial)
    if error:
        print(f"ddpbench: error: {error}", file=sys.stderr, flush=True)
    node0 = results.get(0)
    if node0 is not None and node0["exit_code"] != 0:
        code = int(node0["exit_code"])
        return code if code >= 0 else 128 - code
    return 1 if error or node0 is None else 0


if __name__ == "__main__":
    sys.exit(main())
