"""Paired overhead analysis: pure functions from the collected trial table to result objects.

Trials pair by ``(sweep_dir, condition_id, repeat)`` (:mod:`.pairing`); each per-pair metric (:mod:`.metrics`)
gets a paired t summary and a robust interval, each comparison a verdict (:mod:`.verdict`), a calibration check
(role ``calibration``) or a noise floor (role ``aa``: its throughput-overhead half-width). Definitions:
docs/analysis.md."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Mapping

import pandas as pd

from ddpbench.analysis.calibration import applied_injection, calibration
from ddpbench.analysis.device_split import gpu_rows, startup_rows
from ddpbench.analysis.disturbance import disturbed_trials, pair_flags
from ddpbench.analysis.efficiency import efficiency, workload_of
from ddpbench.analysis.metrics import PAIR_METRICS, PairMetric
from ddpbench.analysis.pairing import pair_table, str_or_none
from ddpbench.analysis.projection import JOB_HOURS, PROJECTED, PROJECTION_METHOD, job_seconds, projected_values
from ddpbench.analysis.rerun import RerunKey, leave_out
from ddpbench.analysis.results import (CALIBRATION_TOLERANCE_PCT, Analysis, Comparison, FailedTrial, OrderEffect,
                                       PairRecord, Stability, jsonable)
from ddpbench.analysis.rows import memory_rows, metric_rows, near_zero, phase_rows, robust_interval
from ddpbench.analysis.stats import (INTERVAL_METHOD, MDE_METHOD, TEST_METHOD, coefficient_of_variation, mean,
                                     paired_summary, to_float)
from ddpbench.analysis.switching import switched_of_pairs
from ddpbench.analysis.tools import tool_artifacts, tool_ranking
from ddpbench.analysis.verdict import lower_bound_confidence, verdict_for
from ddpbench.choices import Role, TrialStatus
from ddpbench.formats.analysis_record import build_analysis_record

__all__ = ["Analysis", "Comparison", "analysis_to_dict", "analyze",
           "applied_injection", "pair_table", "verdict_for"]

#: metrics whose robust view adds a bootstrap interval of the median difference
BOOTSTRAP_METRICS = (PairMetric.step_overhead_ms, PairMetric.step_median_overhead_ms)
ROLE_ORDER = {Role.tool: 0, Role.calibration: 1, Role.aa: 2}


def _role(rows: Iterable[dict[str, Any]], mode: str) -> Role:
    """The role ``mode`` declared (its trials' ``role``); a compared ``baseline`` mode, or none declared, is a tool."""
    role = _first_str((r for r in rows if r.get("mode") == mode), "role")
    return Role(role) if role in ROLE_ORDER else Role.tool


def _int(value: Any) -> int | None:
    v = to_float(value)
    return int(v) if math.isfinite(v) else None


def _first_str(rows: Iterable[dict[str, Any]], key: str) -> str | None:
    return next((text for r in rows if (text := str_or_none(r.get(key)))), None)


def _condition(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in rows:
        for k, v in r.items():
            if k.startswith("cond_") and str_or_none(v) is not None:
                out.setdefault(k[5:], v)
    return out


def _side_figures(cp: list[PairRecord], cs: list[tuple[dict, dict]]) -> dict[str, list[float]]:
    figures = {f"{side}_{name}": [getattr(p, f"{side}_{name}") for p in cp]
               for name in ("wall_s", "steps_per_s", "step_ms") for side in ("base", "mode")}
    for name, column in (("step_median_ms", "step_time_ms_median"), ("startup_s", "startup_s"),
                         ("teardown_s", "teardown_s")):
        for i, side in enumerate(("base", "mode")):
            figures[f"{side}_{name}"] = [to_float(pair[i].get(column)) for pair in cs]
    return figures


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
        step_time_cv_across_pct=100.0 * coefficient_of_variation([to_float(r.get("step_time_ms_mean"))
                                                                  for r in rows]),
        throughput_cv_pct=100.0 * coefficient_of_variation([to_float(r.get("steps_per_s")) for r in rows]),
    )


def _comparison(
    cond: str, mode: str, baseline: str, cp: list[PairRecord], cx: tuple, cs: list[tuple[dict, dict]],
    all_rows: list[dict[str, Any]], budget_pct: float, confidence: float, tolerance_pct: float, job_s: float,
) -> Comparison:
    """One mode against the baseline in one condition (noise floor filled in later)."""
    values: dict[str, list[float]] = {m.name: [getattr(p, m.name) for p in cp]
                                      for m in PAIR_METRICS if m.name != PROJECTED}
    values[PROJECTED] = projected_values(values[PairMetric.step_overhead_pct], values[PairMetric.fixed_diff_s], job_s)
    metrics = {m: paired_summary(v, confidence) for m, v in values.items()}
    figures = _side_figures(cp, cs)
    side_summ = {k: paired_summary(v, confidence) for k, v in figures.items()}
    pct_notes: dict[str, str] = {}
    for m in PAIR_METRICS:
        note = near_zero(mean(figures[m.pct_base.figure]), m.pct_base.unit) if cp and m.pct_base else None
        if note is not None and metrics[m.name].n:
            pct_notes[m.name] = note
            del metrics[m.name]
    role = _role(all_rows, mode)
    switched = switched_of_pairs(cs, confidence)
    return Comparison(
        condition_id=cond, condition=_condition(all_rows), mode=mode, baseline=baseline, role=role,
        stop_kind=_first_str(all_rows, "stop_kind"),
        sweep_dirs=tuple(sorted({p.sweep_dir for p in cp} | {e.sweep_dir for e in cx})),
        n_pairs=len(cp), metrics=metrics, sides=side_summ,
        verdict=verdict_for(metrics, budget_pct, switched_of_pairs(cs, lower_bound_confidence(confidence))[0],
                            lower_bound_confidence(confidence)),
        order_effects=order_effects(cp),
        stability=(stability(baseline, [b for b, _ in cs]), stability(mode, [x for _, x in cs])),
        excluded=cx, host_mismatch=tuple(f"{p.sweep_dir} repeat {p.repeat}" for p in cp if p.hosts_differ),
        calibration=calibration(cp, cs, tolerance_pct) if role == Role.calibration else None,
        noise_floor_pct=None, noise_floor_source=None, pairs=tuple(cp),
        workload=workload_of(all_rows[0]) if all_rows else "mlp",
        robust={m: robust_interval(values[m], confidence, m in BOOTSTRAP_METRICS) for m in metrics},
        pct_notes=pct_notes,
        rows=(phase_rows(cs, confidence) + memory_rows(cs, confidence) + metric_rows(cs, confidence)
              + gpu_rows(cs, confidence) + startup_rows(cs, confidence)),
        efficiency=(efficiency(baseline, [b for b, _ in cs]), efficiency(mode, [x for _, x in cs])),
        flags=pair_flags(cp, cs), switched=switched[0], switched_base=switched[1],
    )


def analyze(frame: pd.DataFrame, baseline: str = "native", budget_pct: float = 2.0, confidence: float = 0.95,
            calibration_tolerance_pct: float = CALIBRATION_TOLERANCE_PCT, rerun: Mapping[RerunKey, str] | None = None,
            job_hours: float = JOB_HOURS) -> Analysis:
    """Compare every mode with ``baseline`` per condition; ``rerun``: pairs a ``repeat=auto`` sweep re-ran
    (excluded); ``job_hours``: the job the projected overhead is for (ValueError unless > 0)."""
    job_s = job_seconds(job_hours)
    records = frame.to_dict("records") if len(frame) else []
    failed = tuple(
        FailedTrial(source_path=str(r.get("source_path", "")), sweep_dir=str(r.get("sweep_dir")),
                    condition_id=str(r.get("condition_id")), mode=str(r.get("mode")), repeat=int(r.get("repeat")),
                    status=str(r.get("status")), exit_code=_int(r.get("exit_code")),
                    error=str_or_none(r.get("error")))
        for r in records if r.get("status") != TrialStatus.ok
    )
    pairs, excluded, sides = pair_table(frame, baseline) if records else ([], [], {})
    pairs, excluded = leave_out(pairs, excluded, rerun or {})
    keys = sorted({(p.condition_id, p.mode) for p in pairs} | {(e.condition_id, e.mode) for e in excluded})
    drafts = []
    for cond, mode in keys:
        cp = [p for p in pairs if p.condition_id == cond and p.mode == mode]
        cx = tuple(e for e in excluded if e.condition_id == cond and e.mode == mode)
        cs = [sides[(p.sweep_dir, p.condition_id, p.repeat, p.mode)] for p in cp]
        all_rows = [r for r in records if str(r.get("condition_id")) == cond and r.get("mode") in (mode, baseline)]
        drafts.append(_comparison(cond, mode, baseline, cp, cx, cs, all_rows, budget_pct, confidence,
                                  calibration_tolerance_pct, job_s))
    floors = {c.condition_id: c.metrics["throughput_overhead_pct"].half_width for c in drafts
              if c.role == Role.aa and math.isfinite(c.metrics["throughput_overhead_pct"].half_width)}
    comparisons = []
    for c in drafts:
        if c.condition_id in floors:
            floor, source = floors[c.condition_id], f"A/A in {c.condition_id}"
        elif floors:
            worst = max(floors, key=lambda k: floors[k])
            floor, source = floors[worst], f"A/A in {worst} (largest of {len(floors)}; other condition)"
        else:
            floor, source = None, None
        comparisons.append(dataclasses.replace(c, noise_floor_pct=floor, noise_floor_source=source))
    comparisons.sort(key=lambda c: (c.condition_id, ROLE_ORDER.get(c.role, 9), c.mode))
    return Analysis(
        baseline=baseline, budget_pct=budget_pct, confidence=confidence, comparisons=tuple(comparisons),
        failed_trials=failed, n_trials=len(records), n_ok=sum(1 for r in records if r.get("status") == TrialStatus.ok),
        noise_floors=floors,
        disturbed_trials=disturbed_trials(records),
        tool_artifacts=tool_artifacts(records),
        tool_ranking=tuple(c.label for c in tool_ranking(comparisons)),
        job_hours=float(job_hours),
        methods={
            "interval": f"{confidence:.0%} {INTERVAL_METHOD}",
            "test": TEST_METHOD,
            "mde": MDE_METHOD,
            "pairing": "by (sweep_dir, condition_id, repeat)",
            "robust": "Hodges-Lehmann estimate with the Wilcoxon signed-rank interval (achieved level shown); "
                      "per-step: BCa bootstrap of the median difference",
            "projection": PROJECTION_METHOD,
        },
    )


def analysis_to_dict(analysis: Analysis) -> dict[str, Any]:
    """The analysis as its ``analysis.json`` record (:mod:`ddpbench.formats.analysis_record`; NaN → null)."""
    return build_analysis_record(jsonable(analysis))
