"""Rows of figures beside the headline metrics: per-phase time, memory peaks, the workload's own metrics. Pure.

Each row holds both sides, the per-pair difference with its t and robust intervals, and the per-pair percentage,
left out with a note when the baseline is near zero (:func:`near_zero`; the rule in docs/analysis.md)."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from ddpbench.analysis.figures import custom_metrics, finite, step_ms
from ddpbench.analysis.results import FigureGroup, FigureRow, RobustInterval
from ddpbench.analysis.robust import bootstrap_interval, wilcoxon_interval
from ddpbench.analysis.stats import mean, paired_summary
from ddpbench.formats.rank_record import PHASES

#: below this baseline mean (per unit) a percentage is not shown: 0.1 ms is about the host clock's
#: and the training loop's own jitter per step; 1 s is below what a launcher's start-up or teardown
#: resolves (process spawn, rendezvous); 1 MB is below the allocator's and the RSS page granularity
NEAR_ZERO_FLOOR = {"ms": 0.1, "s": 1.0, "MB": 1.0}
#: a part of the step (a phase) whose baseline mean is below this share of the baseline's step gets no %
NEAR_ZERO_SHARE = 0.01
#: bytes per MB (10⁶, as the report prints memory)
MB = 1e6

Sides = Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]
Value = Callable[[Mapping[str, Any]], float | None]


def column(name: str, per: float = 1.0) -> Value:
    """A row's finite ``name`` value over ``per`` (e.g. :data:`MB`); None when it lacks one."""
    def value(row: Mapping[str, Any]) -> float | None:
        v = finite(row.get(name))
        return v / per if v is not None else None

    return value


def both_have(sides: Sides, name: str) -> bool:
    """Whether both sides of some pair have a finite ``name`` value."""
    return any(finite(b.get(name)) is not None and finite(x.get(name)) is not None for b, x in sides)


def near_zero(base_mean: float, unit: str, whole: float | None = None) -> str | None:
    """Why a percentage against ``base_mean`` (in ``unit``) is not shown, or None when it may be; ``whole``: what
    ``base_mean`` is a part of (the baseline's step, ms), for the share rule."""
    if not math.isfinite(base_mean):
        return "baseline unknown"
    floor = NEAR_ZERO_FLOOR.get(unit, 0.0)
    if abs(base_mean) <= floor:
        return f"baseline {base_mean:.3g} {unit} is near zero (≤ {floor:g} {unit}): absolute difference only"
    if whole is not None and math.isfinite(whole) and whole > 0 and abs(base_mean) < NEAR_ZERO_SHARE * whole:
        return (f"baseline {base_mean:.3g} {unit} is under {NEAR_ZERO_SHARE:.0%} of the {whole:.3g} {unit} step: "
                "absolute difference only")
    return None


def robust_interval(values: Sequence[float], confidence: float, bootstrap: bool = False) -> RobustInterval:
    """Hodges–Lehmann / Wilcoxon interval of the finite ``values``; with ``bootstrap``, also the
    seeded BCa bootstrap interval of their median (9,999 resamples)."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    w = wilcoxon_interval(xs, confidence)
    lo = hi = math.nan
    if bootstrap and len(xs) >= 2:
        b = bootstrap_interval(xs, "median", confidence)
        lo, hi = b.ci_low, b.ci_high
    return RobustInterval(w.n, w.estimate, w.ci_low, w.ci_high, w.achieved_confidence, lo, hi)


def figure_row(group: FigureGroup, name: str, unit: str, sides: Sides, value: Value, confidence: float,
               whole: float | None = None) -> FigureRow:
    """One :class:`FigureRow` of ``value(row)`` over the pairs' sides (pairs lacking it on a side are left out)."""
    known = [(value(b), value(x)) for b, x in sides]
    both = [(b, x) for b, x in known if b is not None and x is not None]
    base = [b for b, _ in both]
    diffs = [x - b for b, x in both]
    note = near_zero(mean(base), unit, whole) if both else "unknown on a side"
    pct = None
    if note is None:
        pct = paired_summary([100.0 * (x / b - 1.0) for b, x in both], confidence)
    return FigureRow(
        group=group, name=name, unit=unit,
        base=paired_summary(base, confidence), mode=paired_summary([x for _, x in both], confidence),
        diff=paired_summary(diffs, confidence), pct=pct, robust=robust_interval(diffs, confidence), note=note,
    )


def phase_rows(sides: Sides, confidence: float) -> tuple[FigureRow, ...]:
    """Per phase (``phase_time_ms``, ``timing=phase``): mean ms of each side and the difference; () without phases."""
    if not any(finite(b.get(f"phase_time_ms_{PHASES[0]}_mean")) is not None for b, _ in sides):
        return ()
    whole = mean([step_ms(b) or math.nan for b, _ in sides])
    return tuple(
        figure_row(FigureGroup.phase, phase, "ms", sides, column(f"phase_time_ms_{phase}_mean"), confidence, whole)
        for phase in PHASES
    )


def memory_rows(sides: Sides, confidence: float) -> tuple[FigureRow, ...]:
    """Peak host RSS and peak CUDA memory allocated (MB, the largest rank's) where both sides have them."""
    return tuple(figure_row(FigureGroup.memory, name, "MB", sides, column(key, MB), confidence)
                 for key, name in (("memory_host_peak_rss_bytes", "host peak RSS"),
                                   ("memory_cuda_peak_allocated_bytes", "CUDA peak allocated"))
                 if both_have(sides, key))


def metric_rows(sides: Sides, confidence: float) -> tuple[FigureRow, ...]:
    """A row per figure read from the workload's output that is not a known name (its unit as given)."""
    units: dict[str, str] = {}
    for b, x in sides:
        for row in (b, x):
            for name, unit in custom_metrics(row).items():
                if unit or name not in units:
                    units[name] = unit
    return tuple(
        figure_row(FigureGroup.metric, name, unit, sides, column(f"metric_{name}"), confidence)
        for name, unit in sorted(units.items())
    )
