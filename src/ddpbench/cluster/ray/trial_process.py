"""The Ray trial process (``python -m ddpbench.cluster.ray.trial_process --job-dir DIR --spec JSON -- COMMAND...``).

The agent the Ray backend wraps each trial in: one bundle per node in a placement group, one ``NodeAgent`` per bundle
(node rank and bundle 0's address filled in), the trial ended at its first lost node, the group removed on every exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ddpbench.cluster.base import NODE_RANK_TOKEN
from ddpbench.cluster.guarded import exit_status
from ddpbench.cluster.ray.backend import MASTER_ADDR_TOKEN
from ddpbench.errors import DdpbenchError, error_line
from ddpbench.formats.layout import AttemptLayout
from ddpbench.io import write_json_atomic

#: seconds between the trial process's checks of its actors
POLL_S = 0.5
#: seconds the trial process waits for Ray to remove its placement group (removal is asynchronous)
REMOVE_WAIT_S = 30.0


def _fill(text: str, node_rank: int, master_addr: str) -> str:
    return text.replace(NODE_RANK_TOKEN, str(node_rank)).replace(MASTER_ADDR_TOKEN, master_addr)


@dataclass
class TrialProcess:
    """One trial on the Ray cluster: the placement group, one actor per node, their results."""

    attempt: AttemptLayout
    spec: Dict[str, Any]
    command: List[str]
    pg: Any = None
    actors: List[Any] = field(default_factory=list)

    def node_log(self, node_rank: int, stream: str) -> Path:
        if node_rank == 0:  # node 0's own logs are this process's output: its actor writes beside them
            return self.attempt.ray_node0_log(stream)
        return self.attempt.node_log(node_rank, stream)

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

        from ddpbench.cluster.ray.node import NodeAgent  # by reference: each node imports it

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

            from ddpbench.cluster.ray.node import STOP_GRACE_S

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
    """Return once Ray lists ``pg`` as REMOVED (asynchronous), or after ``bound_s`` s with one line on stderr."""
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
    from ddpbench.formats.trial_record import node_entry

    now = time.time()
    for node_rank in range(1, nnodes):
        node = results.get(node_rank) or {"hostname": "unknown", "wall_s": now - started, "exit_code": None,
                                          "spawn_epoch": started, "exit_epoch": now,
                                          "error": error or "stopped: another node of the trial failed"}
        extra = {"error": node["error"]} if "error" in node else {}
        if node.get("footprint") is not None:
            extra["footprint"] = node["footprint"]
        logs = {stream: str(trial.node_log(node_rank, stream)) for stream in ("stdout", "stderr")}
        write_json_atomic(trial.attempt.node_record(node_rank), node_entry(
            node_rank, node["hostname"], wall_s=node["wall_s"], exit_code=node["exit_code"],
            spawn_epoch=node["spawn_epoch"], exit_epoch=node["exit_epoch"], **logs, **extra))


def main(argv: Optional[List[str]] = None) -> int:
    """The trial process: place, run and wait for every node agent of one trial; its exit code is node 0's."""
    parser = argparse.ArgumentParser(prog="python -m ddpbench.cluster.ray.trial_process")
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    spec = json.loads(args.spec)
    trial = TrialProcess(AttemptLayout(Path(args.job_dir)), spec, command)

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
    if (results.get(0) or {}).get("footprint") is not None:  # node 0's, for the driver's node entry
        write_json_atomic(trial.attempt.step_guard_record(0), {"footprint": results[0]["footprint"]})
    for stream, sink in (("stdout", sys.stdout), ("stderr", sys.stderr)):  # node 0's output is this process's
        if trial.node_log(0, stream).is_file():
            sink.write(trial.node_log(0, stream).read_text(errors="replace"))
            sink.flush()
    if error:
        error_line(error)
    node0 = results.get(0)
    if node0 is not None and node0["exit_code"] != 0:
        return exit_status(int(node0["exit_code"]))
    return 1 if error or node0 is None else 0


if __name__ == "__main__":
    sys.exit(main())
