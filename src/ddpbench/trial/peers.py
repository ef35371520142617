"""The nodes of one trial beside node 0: a peer writes its node records into node 0's attempt and ends with a
:class:`~ddpbench.trial.summary.NodeDone`; node 0 gathers them (or reads the peers' ranks)."""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Any, Dict, Mapping, Optional, Sequence

from ddpbench.cluster import NodePlan
from ddpbench.config import DdpbenchConfig
from ddpbench.formats.layout import AttemptLayout
from ddpbench.formats.trial_record import node_entry, nodes_from_ranks
from ddpbench.io import read_json, write_json_atomic
from ddpbench.trial import wrapped
from ddpbench.trial.job import JobInfo
from ddpbench.trial.launch import Launched
from ddpbench.trial.summary import NodeDone


def node_done(cfg: DdpbenchConfig, plan: NodePlan, node_ok: bool, wall_s: Optional[float] = None,
              error: Optional[str] = None) -> NodeDone:
    """What a peer node's job tells its own sweeper (node 0's trial.json holds the trial)."""
    return NodeDone(list(plan.node_ranks), cfg.mode.name, cfg.decided.repeat, node_ok, wall_s, error)


def report_to_owner(cfg: DdpbenchConfig, plan: NodePlan, attempt: AttemptLayout, launched: Launched) -> NodeDone:
    """A peer node's end of a trial: its node records for node 0 (in the attempt's folder), and its NodeDone."""
    for entry in launched.nodes.values():
        write_json_atomic(attempt.node_record(entry["node_rank"]), entry)
    results = launched.outcome.results
    return node_done(cfg, plan, node_ok=all(r.exit_code == 0 for r in results),
                     wall_s=max((r.wall_s for r in results), default=None))


def skip_node(cfg: DdpbenchConfig, job: JobInfo, plan: NodePlan, attempt: AttemptLayout) -> NodeDone:
    """A non-owner that must not launch this trial (its peers left it): record why, report failure."""
    now = time.time()
    for node_rank in plan.node_ranks:
        entry = node_entry(node_rank, socket.gethostname(), wall_s=0.0, exit_code=None, spawn_epoch=now,
                           exit_epoch=now, error=plan.skip_reason)
        write_json_atomic(attempt.node_record(node_rank), entry)
    print(f"ddpbench: node {plan.node_ranks} skips job {job.job_num}: {plan.skip_reason}", flush=True)
    return node_done(cfg, plan, node_ok=False, error=plan.skip_reason)


def peer_nodes(cfg: DdpbenchConfig, attempt: AttemptLayout, plan: NodePlan, own: Mapping[int, Any],
               ranks: Sequence[Mapping[str, Any]]) -> Dict[int, Dict[str, Any]]:
    """Node 0: the other nodes' entries, from their node records in this attempt's shared folder (waited for, bounded
    by ``plan.peer_record_wait_s``) or from their ranks."""
    peers = [r for r in range(cfg.cluster.nnodes) if r not in own]
    if not peers:
        return {}
    if not plan.peer_records:
        return nodes_from_ranks(ranks, peers, cfg.cluster.nproc_per_node)
    found: Dict[int, Dict[str, Any]] = {}
    deadline = time.monotonic() + plan.peer_record_wait_s
    while True:
        for node_rank in (r for r in peers if r not in found):
            with contextlib.suppress(OSError, ValueError):
                found[node_rank] = read_json(attempt.node_record(node_rank))
        if len(found) == len(peers) or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    for node_rank, entry in found.items():  # an srun step's node (slurm one_allocation) recorded its wrapper's code
        entry["exit_code"] = wrapped.exit_code(entry.get("exit_code"), attempt.command_status(node_rank))
    return found
