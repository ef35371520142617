"""Where one attempt of a trial (``attempts/<n>/`` of the job dir) keeps its files: the one place that names them
(docs/formats.md, "Job dir layout"); a mode's tool writes where its template says.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Union

from ddpbench.formats.rank_record import rank_record_name

#: the folders of an attempt: the agents' logs, the rank records, the other nodes' records
LOGS_DIR, METRICS_DIR, NODES_DIR = "logs", "metrics", "nodes"

#: a node rank, or the token an agent spanning every node fills in with its own (``cluster.NODE_RANK_TOKEN``)
NodeRank = Union[int, str]


@dataclass(frozen=True)
class AttemptLayout:
    """The files of one attempt of a trial, below ``root``: the agents' working dir and a mode's {job_dir}."""

    root: Path

    @property
    def logs(self) -> Path:
        """The agents' logs and the records of their guards and wrapped commands."""
        return self.root / LOGS_DIR

    @property
    def metrics(self) -> Path:
        """The rank records (the workload's ``--metrics-dir``)."""
        return self.root / METRICS_DIR

    @property
    def ray_storage(self) -> Path:
        """Ray Train's run storage (``workload=ray_train``)."""
        return self.root / "ray"

    def rank_record(self, rank: int) -> Path:
        """Rank ``rank``'s record: ``metrics/rank-<r>.json``."""
        return self.metrics / rank_record_name(rank)

    def node_record(self, node_rank: int) -> Path:
        """Node ``node_rank``'s record for node 0 (``formats.trial_record.node_entry``): ``nodes/node<r>.json``."""
        return self.root / NODES_DIR / f"node{int(node_rank)}.json"

    def node_log(self, node_rank: int, stream: str) -> Path:
        """Node ``node_rank``'s agent log of ``stream`` (``stdout`` or ``stderr``): ``logs/node<r>.<stream>.log``."""
        return self.logs / f"node{int(node_rank)}.{stream}.log"

    def guard_record(self, node_rank: int) -> Path:
        """What the guard of node ``node_rank``'s agent recorded (``ddpbench.trial.guard``)."""
        return self.logs / f".node{int(node_rank)}.guard.json"

    def step_guard_record(self, node_rank: int) -> Path:
        """What the guard of node ``node_rank``'s task of a SLURM srun step recorded (Ray: node 0's guard's
        ``footprint``, which the trial process copies here)."""
        return self.logs / f".step{int(node_rank)}.guard.json"

    def ray_node0_log(self, stream: str) -> Path:
        """Node 0's actor's log of ``stream`` on a Ray cluster (node 0's own logs are its trial process's output)."""
        return self.logs / f".ray-node0.{stream}.log"

    def command_status(self, node_rank: NodeRank) -> Path:
        """The exit status the shell of a mode's ``wrapper`` recorded for node ``node_rank``'s command."""
        return self.logs / f".node{node_rank}.command-status"
