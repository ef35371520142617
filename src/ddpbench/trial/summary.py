"""What a finished trial tells its sweeper and its user: the typed outcome (node 0's :class:`TrialRecord`, another
node's :class:`NodeDone`), the small dict a Hydra job returns to its sweeper, and the headline line."""

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Union

from ddpbench.choices import TrialStatus

#: trial-record keys a job returns to the sweeper (progress lines, exit status)
SUMMARY_KEYS = ("mode", "repeat", "status", "wall_s", "steps_per_s", "steps", "error", "job_dir", "resumed")
#: the ``status`` of a peer node's summary
NODE_DONE = "node_done"


def summary_of(trial: Mapping[str, Any]) -> Dict[str, Any]:
    """The small dict a job returns to the sweeper."""
    return {key: trial.get(key) for key in SUMMARY_KEYS}


@dataclass(frozen=True)
class TrialRecord:
    """Node 0's end of a trial: its trial record (``trial.json``), written by this run or resumed from an earlier one."""

    record: Dict[str, Any]
    # true when an earlier attempt's ok record was kept and nothing was launched
    resumed: bool = False

    @property
    def ok(self) -> bool:
        """Whether the trial succeeded."""
        return self.record.get("status") == TrialStatus.ok

    def summary(self) -> Dict[str, Any]:
        """The dict the job returns to its sweeper."""
        return summary_of({**self.record, "resumed": True if self.resumed else self.record.get("resumed")})


@dataclass(frozen=True)
class NodeDone:
    """A peer node's end of a trial: whether its agents succeeded (node 0's trial.json holds the trial)."""

    # the node ranks this driver ran
    node_ranks: List[int]
    mode: str
    repeat: int
    # whether every agent of this driver exited 0 (true also when node 0 resumed the trial)
    node_ok: bool
    # the slowest of this driver's agents, s (None when nothing was launched)
    wall_s: Optional[float] = None
    # why this node did not run the trial (None when it did)
    error: Optional[str] = None

    @property
    def ok(self) -> bool:
        """Whether this node's part succeeded."""
        return self.node_ok

    def summary(self) -> Dict[str, Any]:
        """The dict the job returns to its sweeper (``status`` :data:`NODE_DONE`)."""
        return {"status": NODE_DONE, "node_rank": list(self.node_ranks), "mode": self.mode, "repeat": self.repeat,
                "node_ok": self.node_ok, "wall_s": self.wall_s, "error": self.error}


#: what a trial's driver ends with
TrialOutcome = Union[TrialRecord, NodeDone]


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def headline(trial: Mapping[str, Any]) -> str:
    """One line with a trial's headline figures."""
    step = (trial.get("step_time_ms") or {}).get("median")
    return (
        f"{trial.get('mode')} repeat={trial.get('repeat')} status={trial.get('status')} "
        f"wall={_fmt(trial.get('wall_s'), '.2f')}s steps={trial.get('steps')} "
        f"steps/s={_fmt(trial.get('steps_per_s'), '.1f')} step_median={_fmt(step, '.2f')}ms "
        f"startup={_fmt(trial.get('startup_s'), '.2f')}s teardown={_fmt(trial.get('teardown_s'), '.2f')}s"
    )
