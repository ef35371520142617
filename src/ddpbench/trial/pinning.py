"""The trial's side of ``cluster.cpu_affinity`` (docs/accuracy.md): plan this host's cores, pin the driver to the
others' CPUs while the agents run, and hand the ranks their plan (they pin themselves: ddpbench.workload.affinity)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, Optional

from ddpbench.config import DdpbenchConfig
from ddpbench.errors import ConfigError
from ddpbench.choices import CpuAffinity
from ddpbench.workload.affinity import AFFINITY_ENV, Plan, current_cpus, plan

#: backends whose node agents run on the driver's host, and how many ranks of a trial they put here
_HOST_RANKS = {"local": lambda c: c.nnodes * c.nproc_per_node, "static": lambda c: c.nproc_per_node}


@dataclass(frozen=True)
class TrialPinning:
    """One trial's affinity: the setting, the plan for this host (None: not pinned here), the env value."""

    # the setting as text: auto, none or the CPU list
    setting: str
    # CPUs the driver could use before pinning (this host's CPUs for the trial)
    available: tuple[int, ...]
    # the plan of this host's ranks; None when nothing is pinned or the ranks plan on their own hosts
    plan: Optional[Plan]
    # value of AFFINITY_ENV for the agents; None = unset
    env_value: Optional[str]
    # one line on what could not be kept apart, or where the plan is made
    note: Optional[str]

    @property
    def own_cpus(self) -> Optional[int]:
        """How many CPUs this host's ranks were pinned to (None: not pinned here)."""
        return len(self.plan.rank_cpus) if self.plan is not None and self.plan.ranks else None

    def record(self) -> Dict[str, Any]:
        """The trial record's ``load.cpu_affinity``."""
        ranks = [list(g) for g in self.plan.ranks] if self.plan is not None and self.plan.ranks else None
        others = list(self.plan.others) if self.plan is not None and self.plan.others is not None else None
        return {"setting": self.setting, "rank_cpus": ranks, "other_cpus": others, "note": self.note}

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Pin the driver to the others' CPUs and publish the plan to the agents it spawns; undo both after."""
        saved_env = os.environ.get(AFFINITY_ENV)
        saved_mask = current_cpus()
        others = self.plan.others if self.plan is not None else None
        try:
            _set_env(self.env_value)
            if others and saved_mask is not None:
                os.sched_setaffinity(0, others)
            yield
        finally:
            if others and saved_mask is not None:
                os.sched_setaffinity(0, saved_mask)
            _set_env(saved_env)


def _set_env(value: Optional[str]) -> None:
    """Set AFFINITY_ENV in this process's environment to ``value`` (None: unset it)."""
    if value is None:
        os.environ.pop(AFFINITY_ENV, None)
    else:
        os.environ[AFFINITY_ENV] = value


def trial_pinning(cfg: DdpbenchConfig) -> TrialPinning:
    """The affinity of a trial of ``cfg`` on this host. ConfigError (one line) when a listed CPU is not here."""
    cluster = cfg.cluster
    setting = cfg.decided.cpu_affinity
    text = str(setting) if isinstance(setting, CpuAffinity) else ",".join(str(c) for c in setting)
    available = tuple(current_cpus() or range(os.cpu_count() or 1))
    if setting == CpuAffinity.none:
        return TrialPinning(text, available, None, None, None)
    host_ranks = _HOST_RANKS.get(str(cluster.kind))
    if host_ranks is None:
        if setting == CpuAffinity.auto:
            return TrialPinning(text, available, None, str(setting), "each rank plans from its own node's CPUs")
        assert isinstance(setting, tuple)  # "auto" and "none" returned above
        remote = plan(setting, setting, int(cluster.nproc_per_node))
        return TrialPinning(text, available, None, remote.env_value(), "the list is applied on every node, unchecked")
    try:
        host = plan(setting, available, host_ranks(cluster))
    except ValueError as error:
        raise ConfigError(f"cluster.cpu_affinity={text!r}: {error}") from None
    return TrialPinning(text, available, host, host.env_value(), host.note)
