"""Was a trial disturbed by what else ran? Pure flags for trials, pairs and outlying pairs, with one-line reasons.

A pair is disturbed when either trial is; a pair's overhead is an outlier when its modified z-score exceeds 3.5
(Iglewicz and Hoaglin 1993). Thresholds and their reasons: docs/analysis.md."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median as _median
from typing import Any, Mapping, Sequence, cast

from ddpbench.analysis.figures import finite
from ddpbench.analysis.results import Flag, PairRecord
from ddpbench.choices import TrialStatus

#: other processes' CPU time over the machine's capacity (wall × CPUs) above which a trial is disturbed
FOREIGN_CPU_SHARE_MAX = 0.05
#: steal time over the machine's capacity above which a trial is disturbed
STEAL_SHARE_MAX = 0.02
#: load-average excess (1-minute load minus the trial's own busy CPUs) per CPU above which a trial is disturbed,
#: used only without the other processes' CPU time (the load average lags, so only a large excess counts)
LOAD_EXCESS_PER_CPU_MAX = 0.5
#: modified z-score above which a pair's overhead is an outlier
MODIFIED_Z_MAX = 3.5
#: Consistency constants: MAD · 1.4826 and mean absolute deviation · 1.2533 estimate a normal SD.
_MAD_TO_SD = 1.4826
_MEAN_AD_TO_SD = 1.2533


@dataclass(frozen=True)
class TrialLoad:
    """What else ran during one trial. None marks a figure that was not recorded."""

    # the trial's wall time, seconds
    wall_s: float
    # CPUs of the machine (or of the cpuset the trial and its neighbours share)
    n_cpus: int
    # CPUs the trial itself keeps busy (e.g. its ranks on this host)
    own_cpus: float
    # 1-minute load average when the trial started and when it ended
    load1_start: float | None = None
    load1_end: float | None = None
    # CPU seconds (user + system) used during the trial by processes outside its process tree
    foreign_cpu_s: float | None = None
    # steal time during the trial, CPU seconds summed over all CPUs (/proc/stat "steal" delta)
    steal_s: float | None = None


def trial_disturbance(load: TrialLoad) -> str | None:
    """One-line reason why the trial counts as disturbed, or None; ValueError unless wall time and CPUs are > 0."""
    if not (math.isfinite(load.wall_s) and load.wall_s > 0):
        raise ValueError(f"wall_s must be positive, got {load.wall_s}")
    if load.n_cpus < 1:
        raise ValueError(f"n_cpus must be at least 1, got {load.n_cpus}")
    capacity = load.wall_s * load.n_cpus
    reasons = []
    if load.foreign_cpu_s is not None and load.foreign_cpu_s / capacity > FOREIGN_CPU_SHARE_MAX:
        reasons.append(f"other processes used {load.foreign_cpu_s:.1f} CPU s "
                       f"({100 * load.foreign_cpu_s / capacity:.0f} % of {load.n_cpus} CPUs)")
    if load.steal_s is not None and load.steal_s / capacity > STEAL_SHARE_MAX:
        reasons.append(f"steal time {load.steal_s:.1f} CPU s ({100 * load.steal_s / capacity:.0f} %)")
    if load.foreign_cpu_s is None:
        loads = [x for x in (load.load1_start, load.load1_end) if x is not None]
        if loads and max(loads) - load.own_cpus > LOAD_EXCESS_PER_CPU_MAX * load.n_cpus:
            reasons.append(f"load average {max(loads):.2f} with {load.own_cpus:g} own busy CPUs "
                           f"on {load.n_cpus} CPUs")
    return "; ".join(reasons) if reasons else None


def modified_z_scores(values: Sequence[float]) -> list[float]:
    """Robust z-scores (x − median) / (1.4826 · MAD) of ``values``; with MAD 0 the scale is 1.2533 · the mean
    absolute deviation (all 0 when that is 0 too); NaN with fewer than 3 values."""
    xs = [float(v) for v in values]
    if any(not math.isfinite(v) for v in xs):
        raise ValueError("values must be finite numbers")
    if len(xs) < 3:
        return [math.nan] * len(xs)
    med = _median(xs)
    dev = [abs(x - med) for x in xs]
    scale = _MAD_TO_SD * _median(dev)
    if scale == 0.0:
        scale = _MEAN_AD_TO_SD * math.fsum(dev) / len(dev)
    if scale == 0.0:
        return [0.0] * len(xs)
    return [(x - med) / scale for x in xs]


def outlier_pairs(overheads: Sequence[float], unit: str = "%") -> list[str | None]:
    """Per pair: a one-line reason when its overhead (in ``unit``) has |modified z-score| > :data:`MODIFIED_Z_MAX`,
    else None."""
    xs = [float(v) for v in overheads]
    scores = modified_z_scores(xs)
    med = _median(xs) if xs else math.nan
    return [
        f"overhead {x:+.3g} {unit} is {abs(z):.1f} robust SDs from the median {med:+.3g} {unit}"
        if math.isfinite(z) and abs(z) > MODIFIED_Z_MAX else None
        for x, z in zip(xs, scores)
    ]


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
        wall_s=wall, n_cpus=int(n_cpus), own_cpus=_own_cpus(row.get("load_own_cpus"), ranks_here, int(n_cpus)),
        load1_start=finite(row.get("load_load1_start")), load1_end=finite(row.get("load_load1_end")),
        foreign_cpu_s=finite(row.get("load_foreign_cpu_s")), steal_s=finite(row.get("load_steal_s")),
    )


def trial_disturbance_of(row: Mapping[str, Any]) -> str | None:
    """Why the trial of ``row`` counts as disturbed, or None (also when it recorded no usable ``load``)."""
    load = trial_load(row)
    return trial_disturbance(load) if load is not None else None


def disturbed_trials(records: Sequence[Mapping[str, Any]]) -> tuple[Flag, ...]:
    """Every ok trial whose ``load`` shows it was disturbed, with the reason."""
    return tuple(Flag("disturbed trial", str(r.get("sweep_dir")), str(r.get("condition_id")), str(r.get("mode")),
                      int(cast(Any, r.get("repeat"))), why)
                 for r in records if r.get("status") == TrialStatus.ok and (why := trial_disturbance_of(r)))


def pair_flags(pairs: Sequence[PairRecord],
               sides: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> tuple[Flag, ...]:
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
