"""Order effects and run-to-run stability of a comparison's trials (pure functions of pairs and table rows)."""

from __future__ import annotations

from typing import Any

from ddpbench.analysis.results import OrderEffect, PairRecord, Stability
from ddpbench.analysis.stats import coefficient_of_variation, mean, to_float

__all__ = ["order_effects", "stability"]


def order_effects(pairs: list[PairRecord]) -> tuple[OrderEffect, ...]:
    """Throughput- and wall-overhead means over pairs where the mode ran first vs second."""
    out = []
    for metric in ("throughput_overhead_pct", "wall_overhead_pct"):
        first = [getattr(p, metric) for p in pairs if p.mode_position < p.base_position]
        second = [getattr(p, metric) for p in pairs if p.mode_position > p.base_position]
        out.append(OrderEffect(metric, len(first), mean(first), len(second), mean(second)))
    return tuple(out)


def stability(mode: str, rows: list[dict[str, Any]]) -> Stability:
    """Within- and across-trial variability of one mode's trials (rows of the collected table)."""
    within = [
        to_float(r.get("step_time_ms_stdev")) / to_float(r.get("step_time_ms_mean"))
        for r in rows
        if to_float(r.get("step_time_ms_mean")) > 0
    ]
    return Stability(
        mode=mode,
        n_trials=len(rows),
        step_time_cv_within_pct=100.0 * mean(within),
        step_time_cv_across_pct=100.0 * coefficient_of_variation([to_float(r.get("step_time_ms_mean")) for r in rows]),
        throughput_cv_pct=100.0 * coefficient_of_variation([to_float(r.get("steps_per_s")) for r in rows]),
    )
