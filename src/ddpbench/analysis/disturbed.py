"""Disturbed trials and pairs, and outlying pairs, from the collected table (trial record v2 ``load``).

Applies the rules of :mod:`ddpbench.analysis.disturbance` to each trial's ``load_<key>`` columns; a trial without
a usable ``load`` is never flagged disturbed."""

from __future__ import annotations

from typing import Any, Mapping, Sequence, cast

from ddpbench.analysis.disturbance import TrialLoad, outlier_pairs, trial_disturbance
from ddpbench.analysis.figures import finite
from ddpbench.analysis.results import Flag, PairRecord

__all__ = ["OUTLIER_METRICS", "disturbed_trials", "pair_flags", "trial_disturbance_of", "trial_load"]

#: per-pair metrics checked for outliers, with their units
OUTLIER_METRICS = (("step_overhead_ms", "ms"), ("throughput_overhead_pct", "%"))


def _own_cpus(value: Any, ranks_here: float, n_cpus: int) -> float:
    """CPUs the trial keeps busy: the pinned CPU count (``own_cpus``: a number, a list, or ``0,1``/``0-3``
    text), else its ranks on this host, at most ``n_cpus``."""
    count = finite(value)
    if count is None and isinstance(value, (list, tuple)):
        count = float(len(value))
    elif count is None and isinstance(value, str) and value.strip():
        count = 0.0
        for part in value.split(","):
            lo, _, hi = part.partition("-")
            count += (int(hi) - int(lo) + 1) if hi.strip().isdigit() and lo.strip().isdigit() else 1
    return min(float(n_cpus), count if count is not None else ranks_here)


def trial_load(row: Mapping[str, Any]) -> TrialLoad | None:
    """The trial's :class:`TrialLoad`, or None when it recorded no usable ``load`` (no CPU count, no wall)."""
    n_cpus = finite(row.get("load_n_cpus"))
    wall = finite(row.get("wall_s"))
    if n_cpus is None or n_cpus < 1 or wall is None or wall <= 0:
        return None
    ranks_here = finite(row.get("nproc_per_node")) or 1.0
    return TrialLoad(
        wall_s=wall,
        n_cpus=int(n_cpus),
        own_cpus=_own_cpus(row.get("load_own_cpus"), ranks_here, int(n_cpus)),
        load1_start=finite(row.get("load_load1_start")),
        load1_end=finite(row.get("load_load1_end")),
        foreign_cpu_s=finite(row.get("load_foreign_cpu_s")),
        steal_s=finite(row.get("load_steal_s")),
    )


def trial_disturbance_of(row: Mapping[str, Any]) -> str | None:
    """Why the trial of ``row`` counts as disturbed, or None (also when it recorded no usable ``load``)."""
    load = trial_load(row)
    return trial_disturbance(load) if load is not None else None


def disturbed_trials(records: Sequence[Mapping[str, Any]]) -> tuple[Flag, ...]:
    """Every ok trial whose ``load`` shows it was disturbed, with the reason."""
    out = []
    for r in records:
        if r.get("status") != "ok":
            continue
        why = trial_disturbance_of(r)
        if why:
            out.append(Flag("disturbed trial", str(r.get("sweep_dir")), str(r.get("condition_id")),
                            str(r.get("mode")), int(cast(Any, r.get("repeat"))), why))
    return tuple(out)


def pair_flags(pairs: Sequence[PairRecord], sides: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> tuple[Flag, ...]:
    """Disturbed pairs (either trial disturbed) and outlying pairs of one comparison, in pair order."""
    flags: list[Flag] = []
    for p, (b, x) in zip(pairs, sides):
        parts = [f"{label} trial: {why}" for label, why in
                 (("baseline", trial_disturbance_of(b)), ("mode", trial_disturbance_of(x))) if why]
        if parts:
            flags.append(Flag("disturbed pair", p.sweep_dir, p.condition_id, p.mode, p.repeat, "; ".join(parts)))
    for metric, unit in OUTLIER_METRICS:
        values = [getattr(p, metric) for p in pairs]
        usable = [(p, v) for p, v in zip(pairs, values) if finite(v) is not None]
        reasons = outlier_pairs([v for _, v in usable], unit)
        for (p, _), why in zip(usable, reasons):
            if why:
                flags.append(Flag("outlier pair", p.sweep_dir, p.condition_id, p.mode, p.repeat, f"{metric}: {why}"))
    return tuple(flags)
