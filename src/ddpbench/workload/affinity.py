"""CPU affinity of the ranks (``cluster.cpu_affinity``): parse the setting, plan the cores, pin a rank. Torch-free and
pure except :func:`pin_from_environment`. The settings, the plan and the host slots: docs/accuracy.md."""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import groupby
from typing import Mapping, Sequence, Union

from ddpbench.choices import CpuAffinity

AFFINITY_ENV = "DDPBENCH_CPU_AFFINITY"
"""Environment variable carrying the rank plan from the trial to the workload."""

PLAN_PREFIX = "plan:"
"""Start of an :data:`AFFINITY_ENV` value that is a host plan (else it is ``auto``)."""

CpuSetting = Union[CpuAffinity, tuple[int, ...]]
"""``cluster.cpu_affinity`` parsed: ``auto``, ``none`` or the CPU list in the order given."""


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """``"0,2-3"`` -> ``(0, 2, 3)`` in the order given, duplicates dropped. ValueError (one line) when malformed."""
    cpus: list[int] = []
    for part in str(text).replace(" ", "").split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"{part!r} is not a CPU number or range A-B")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first:
            raise ValueError(f"range {part!r} runs backwards")
        cpus.extend(c for c in range(first, last + 1) if c not in cpus)
    return tuple(cpus)


def parse_setting(value: object) -> CpuSetting:
    """``auto`` / ``none`` as their member, else the CPU list (``0,1``, ``0-3``, a number, a list); ValueError (one
    line)."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        value = ",".join(str(v) for v in value)
    text = str(value).strip()
    if text in tuple(CpuAffinity):
        return CpuAffinity(text)
    try:
        return parse_cpu_list(text)
    except ValueError as error:
        raise ValueError(f"must be auto, none or a CPU list like 0,1 or 0-3 ({error})") from None


def format_cpus(cpus: Sequence[int]) -> str:
    """``(0, 1, 2, 5)`` -> ``"0-2,5"``."""
    runs = [[cpu for _, cpu in run] for _, run in groupby(enumerate(sorted(set(cpus))), lambda ic: ic[1] - ic[0])]
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


@dataclass(frozen=True)
class Plan:
    """Where a host's ranks and the trial's other processes run."""

    # one CPU tuple per host slot (rank); empty when nothing is pinned
    ranks: tuple[tuple[int, ...], ...]
    # CPUs for the driver, node agents and the tool; None = not pinned (they share the ranks' CPUs)
    others: tuple[int, ...] | None
    # one line when the plan could not keep the ranks apart from each other or from the others
    note: str | None = None

    @property
    def rank_cpus(self) -> tuple[int, ...]:
        """Every CPU some rank is pinned to, sorted."""
        return tuple(sorted({c for group in self.ranks for c in group}))

    def env_value(self) -> str:
        """The value of :data:`AFFINITY_ENV` for this plan: ``"plan:0;1"``."""
        return PLAN_PREFIX + ";".join(format_cpus(group) for group in self.ranks)


def _split(cpus: Sequence[int], n: int) -> tuple[tuple[int, ...], ...]:
    """``n`` contiguous groups of ``cpus``, sizes differing by at most one; round robin when fewer CPUs than ``n``."""
    if len(cpus) < n:
        return tuple((cpus[i % len(cpus)],) for i in range(n))
    size, extra = divmod(len(cpus), n)
    starts = [i * size + min(i, extra) for i in range(n + 1)]
    return tuple(tuple(cpus[starts[i]:starts[i + 1]]) for i in range(n))


def plan(setting: CpuSetting, available: Sequence[int], n_ranks: int) -> Plan:
    """The plan for ``n_ranks`` ranks on a host whose usable CPUs are ``available``; ValueError (one line) when a
    listed CPU is not available."""
    avail = sorted(set(available))
    if setting == CpuAffinity.none or n_ranks < 1 or not avail:
        return Plan(ranks=(), others=None)
    if setting == CpuAffinity.auto:
        if len(avail) > n_ranks:
            per_rank = (len(avail) - 1) // n_ranks
            used = avail[len(avail) - per_rank * n_ranks:]
            return Plan(ranks=_split(used, n_ranks), others=tuple(avail[:len(avail) - len(used)]))
        note = (f"{len(avail)} CPUs for {n_ranks} ranks: the driver and agents share the ranks' CPUs"
                + ("" if len(avail) == n_ranks else "; ranks share CPUs"))
        return Plan(ranks=_split(avail, n_ranks), others=None, note=note)
    assert isinstance(setting, tuple)
    missing = [c for c in setting if c not in avail]
    if missing:
        raise ValueError(f"CPU {missing[0]} is not available here (available: {format_cpus(avail)})")
    rest = tuple(c for c in avail if c not in setting)
    notes = []
    if len(setting) < n_ranks:
        notes.append(f"{len(setting)} CPUs listed for {n_ranks} ranks: ranks share CPUs")
    if not rest:
        notes.append("no CPU left outside the list: the driver and agents share the ranks' CPUs")
    return Plan(ranks=_split(list(setting), n_ranks), others=rest or None, note="; ".join(notes) or None)


def current_cpus() -> list[int] | None:
    """The CPUs this process may run on now (its affinity mask; the rank record's ``cpu_affinity``); None where unknown."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def slot_cpus(value: str, environ: Mapping[str, str]) -> tuple[int, ...] | None:
    """This rank's CPUs under the :data:`AFFINITY_ENV` ``value`` (``plan:0;1``, or ``auto``: planned from this
    process's CPUs for ``LOCAL_WORLD_SIZE`` ranks), or None (not pinned); ValueError (one line) when malformed."""
    local_rank = int(environ.get("LOCAL_RANK", "0"))
    local_world = int(environ.get("LOCAL_WORLD_SIZE", "1"))
    text = value.strip()
    if text == CpuAffinity.auto:
        groups = plan(CpuAffinity.auto, current_cpus() or range(os.cpu_count() or 1), local_world).ranks
    elif text.startswith(PLAN_PREFIX):
        groups = tuple(parse_cpu_list(group) for group in text[len(PLAN_PREFIX):].split(";"))
    else:
        raise ValueError(f"${AFFINITY_ENV}={value!r}: expected auto or {PLAN_PREFIX}<cpus>;<cpus>...")
    if not groups:
        return None
    slot = local_rank
    if len(groups) > local_world:
        slot = int(environ.get("GROUP_RANK", "0")) * local_world + local_rank
    return groups[slot % len(groups)]


def pin_from_environment() -> None:
    """Pin this process to its slot's CPUs when :data:`AFFINITY_ENV` asks (before torch starts its threads)."""
    value = os.environ.get(AFFINITY_ENV, "")
    cpus = slot_cpus(value, os.environ) if value and hasattr(os, "sched_setaffinity") else None
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
