"""Paired overhead analysis: pure functions from the collected trial table to result objects.

Trials are paired by ``(sweep_dir, condition_id, repeat)``: the baseline mode's trial (default
``native``) against each other mode's trial with the same key. Per pair (x = the compared mode,
b = the baseline):

- ``wall_overhead_pct`` = 100 · (x.wall_s / b.wall_s − 1)
- ``throughput_overhead_pct`` = 100 · (b.steps_per_s / x.steps_per_s − 1) (the reference's definition)
- ``step_overhead_ms`` = x.step_time_ms.mean − b.step_time_ms.mean;
  ``step_overhead_pct`` = 100 · (x.step_time_ms.mean / b.step_time_ms.mean − 1)
- ``startup_diff_s``, ``train_diff_s``, ``teardown_diff_s`` = x − b, seconds.

A pair is excluded (and counted) when a side is missing, not ``ok``, or lacks a figure.
Across the pairs of one (condition, mode) each metric gets a :class:`~ddpbench.analysis.stats.PairedSummary`
(Student's paired t interval, paired t test, MDE at 80 % power). The verdict against the budget
uses the intervals of wall and throughput overhead (rules in :func:`verdict_for`).

Roles: a mode named ``inject`` (or ``inject*``) is a calibration comparison, checked against
the ``--inject-*`` workload arguments its mode really passed (``config.inject``, which every mode's
config carries, counts only for the mode that applies it); a mode ending in ``_aa`` is an A/A comparison whose throughput-overhead
interval half-width is the noise floor quoted for the other comparisons.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable

import pandas as pd

from ddpbench.analysis.calibration import applied_injection, calibration
from ddpbench.analysis.results import (
    CALIBRATION_TOLERANCE_PCT,
    Analysis,
    Calibration,
    CalibrationItem,
    Comparison,
    ExcludedPair,
    FailedTrial,
    OrderEffect,
    PairRecord,
    Stability,
    Verdict,
)
from ddpbench.analysis.stability import order_effects, stability
from ddpbench.analysis.stats import (
    INTERVAL_METHOD,
    MDE_METHOD,
    TEST_METHOD,
    PairedSummary,
    paired_summary,
    to_float,
)
from ddpbench.formats.analysis_record import build_analysis_record

__all__ = [
    "METRIC_UNITS",
    "Analysis",
    "Calibration",
    "CalibrationItem",
    "Comparison",
    "ExcludedPair",
    "FailedTrial",
    "OrderEffect",
    "PairRecord",
    "Stability",
    "Verdict",
    "analysis_to_dict",
    "analyze",
    "applied_injection",
    "pair_table",
    "role_of",
    "verdict_for",
]

PAIR_KEY = ("sweep_dir", "condition_id", "repeat")
#: every per-pair metric and its unit: the analysis declares units, the report shows them
METRIC_UNITS: dict[str, str] = {
    "wall_overhead_pct": "%",
    "throughput_overhead_pct": "%",
    "step_overhead_ms": "ms",
    "step_overhead_pct": "%",
    "startup_diff_s": "s",
    "train_diff_s": "s",
    "teardown_diff_s": "s",
}
VERDICT_METRICS = ("wall_overhead_pct", "throughput_overhead_pct")
SIDE_FIGURES = ("wall_s", "steps_per_s", "step_time_ms_mean", "startup_s", "teardown_s")
ROLE_ORDER = {"tool": 0, "calibration": 1, "aa": 2}

WITHIN, OVER, INCONCLUSIVE = "within", "over", "inconclusive"


def role_of(mode: str, baseline: str = "native") -> str:
    """``calibration`` for ``inject*`` modes, ``aa`` for ``*_aa`` modes, else ``tool``."""
    if mode.startswith("inject"):
        return "calibration"
    if mode.endswith("_aa") or mode == f"{baseline}_aa":
        return "aa"
    return "tool"


def _int(value: Any) -> int | None:
    v = to_float(value)
    return int(v) if math.isfinite(v) else None


def _str(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _hosts(value: Any) -> frozenset[str]:
    text = _str(value)
    return frozenset(h for h in text.split(",") if h) if text else frozenset()


def _pick(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Among duplicate trials of one mode and key prefer an ok one, then the latest ended."""
    return max(rows, key=lambda r: (r.get("status") == "ok", _str(r.get("ended_at")) or ""))


def _side_problem(row: dict[str, Any] | None, label: str) -> str | None:
    if row is None:
        return f"no {label} trial"
    if row.get("status") != "ok":
        err = _str(row.get("error"))
        return f"{label} trial {row.get('status')}" + (f": {err}" if err else "")
    missing = [k for k in SIDE_FIGURES if not math.isfinite(to_float(row.get(k)))]
    if missing:
        return f"{label} trial lacks {', '.join(missing)}"
    return None


def _pct(x: float, b: float) -> float:
    return 100.0 * (x / b - 1.0) if b else math.nan


def _record(b: dict[str, Any], x: dict[str, Any], mode: str) -> PairRecord:
    bw, xw = to_float(b["wall_s"]), to_float(x["wall_s"])
    bs, xs = to_float(b["steps_per_s"]), to_float(x["steps_per_s"])
    bm, xm = to_float(b["step_time_ms_mean"]), to_float(x["step_time_ms_mean"])
    return PairRecord(
        sweep_dir=str(b["sweep_dir"]),
        condition_id=str(b["condition_id"]),
        repeat=int(b["repeat"]),
        mode=mode,
        base_wall_s=bw,
        mode_wall_s=xw,
        base_steps_per_s=bs,
        mode_steps_per_s=xs,
        base_step_ms=bm,
        mode_step_ms=xm,
        mode_position=int(to_float(x.get("pair_position"))),
        base_position=int(to_float(b.get("pair_position"))),
        hosts_differ=_hosts(b.get("env_hostnames")) != _hosts(x.get("env_hostnames")),
        wall_overhead_pct=_pct(xw, bw),
        throughput_overhead_pct=100.0 * (bs / xs - 1.0) if xs else math.nan,
        step_overhead_ms=xm - bm,
        step_overhead_pct=_pct(xm, bm),
        startup_diff_s=to_float(x["startup_s"]) - to_float(b["startup_s"]),
        train_diff_s=to_float(x.get("train_s")) - to_float(b.get("train_s")),
        teardown_diff_s=to_float(x["teardown_s"]) - to_float(b["teardown_s"]),
    )


def _grouped(frame: pd.DataFrame) -> dict[tuple[str, str], dict[int, dict[str, list[dict[str, Any]]]]]:
    """(sweep_dir, condition_id) → repeat → mode → rows."""
    out: dict[tuple[str, str], dict[int, dict[str, list[dict[str, Any]]]]] = {}
    for row in frame.to_dict("records"):
        key = (str(row["sweep_dir"]), str(row["condition_id"]))
        out.setdefault(key, {}).setdefault(int(row["repeat"]), {}).setdefault(str(row["mode"]), []).append(row)
    return out


def pair_table(
    frame: pd.DataFrame, baseline: str = "native"
) -> tuple[list[PairRecord], list[ExcludedPair], dict[tuple[str, str, int, str], tuple[dict, dict]]]:
    """Pair every non-baseline mode's trials with the baseline's.

    A mode is paired only within the (sweep_dir, condition_id) groups where it was run. Returns
    ``(pairs, excluded, sides)``; ``sides`` maps (sweep_dir, condition_id, repeat, mode) to the
    (baseline row, mode row) of each included pair.
    """
    pairs: list[PairRecord] = []
    excluded: list[ExcludedPair] = []
    sides: dict[tuple[str, str, int, str], tuple[dict, dict]] = {}
    for (sweep, cond), by_repeat in sorted(_grouped(frame).items()):
        modes = sorted({m for rows in by_repeat.values() for m in rows} - {baseline})
        for mode in modes:
            for repeat in sorted(by_repeat):
                rows = by_repeat[repeat]
                if baseline not in rows and mode not in rows:
                    continue
                b = _pick(rows[baseline]) if baseline in rows else None
                x = _pick(rows[mode]) if mode in rows else None
                problems = [p for p in (_side_problem(b, baseline), _side_problem(x, mode)) if p]
                if problems:
                    excluded.append(ExcludedPair(sweep, cond, repeat, mode, "; ".join(problems)))
                    continue
                assert b is not None and x is not None
                pairs.append(_record(b, x, mode))
                sides[(sweep, cond, repeat, mode)] = (b, x)
    return pairs, excluded, sides


def verdict_for(metrics: dict[str, PairedSummary], budget_pct: float) -> Verdict:
    """Verdict on the wall- and throughput-overhead intervals against ``budget_pct``.

    Per metric: ``over`` when the interval lies wholly above the budget, ``within`` when wholly
    below, else (straddling, or no interval because n < 2) ``inconclusive``. Overall: ``over`` if
    any metric is over, ``within`` if all are within, else ``inconclusive``.
    """
    per: dict[str, str] = {}
    for name in VERDICT_METRICS:
        s = metrics.get(name)
        if s is None or not (math.isfinite(s.ci_low) and math.isfinite(s.ci_high)):
            per[name] = INCONCLUSIVE
        elif s.ci_low > budget_pct:
            per[name] = OVER
        elif s.ci_high < budget_pct:
            per[name] = WITHIN
        else:
            per[name] = INCONCLUSIVE
    if OVER in per.values():
        status = OVER
    elif all(v == WITHIN for v in per.values()):
        status = WITHIN
    else:
        status = INCONCLUSIVE
    parts = []
    for name, v in per.items():
        s = metrics.get(name)
        if s is not None and math.isfinite(s.ci_low):
            parts.append(f"{name} CI [{s.ci_low:+.2f}, {s.ci_high:+.2f}] % is {v}")
        else:
            parts.append(f"{name} has no interval (n={s.n if s else 0})")
    return Verdict(status, budget_pct, f"budget {budget_pct:g} %: " + "; ".join(parts), per)


def _first_str(rows: Iterable[dict[str, Any]], key: str) -> str | None:
    for r in rows:
        v = _str(r.get(key))
        if v:
            return v
    return None


def _condition(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in rows:
        for k, v in r.items():
            if k.startswith("cond_") and _str(v) is not None:
                out.setdefault(k[5:], v)
    return out


def analyze(
    frame: pd.DataFrame,
    baseline: str = "native",
    budget_pct: float = 2.0,
    confidence: float = 0.95,
    calibration_tolerance_pct: float = CALIBRATION_TOLERANCE_PCT,
) -> Analysis:
    """Compare every mode with ``baseline`` per condition; see the module docstring."""
    records = frame.to_dict("records") if len(frame) else []
    failed = tuple(
        FailedTrial(
            source_path=str(r.get("source_path", "")),
            sweep_dir=str(r.get("sweep_dir")),
            condition_id=str(r.get("condition_id")),
            mode=str(r.get("mode")),
            repeat=int(r.get("repeat")),
            status=str(r.get("status")),
            exit_code=_int(r.get("exit_code")),
            error=_str(r.get("error")),
        )
        for r in records
        if r.get("status") != "ok"
    )
    pairs, excluded, sides = pair_table(frame, baseline) if records else ([], [], {})
    keys = sorted({(p.condition_id, p.mode) for p in pairs} | {(e.condition_id, e.mode) for e in excluded})
    drafts = []
    for cond, mode in keys:
        cp = [p for p in pairs if p.condition_id == cond and p.mode == mode]
        cx = tuple(e for e in excluded if e.condition_id == cond and e.mode == mode)
        cs = [sides[(p.sweep_dir, p.condition_id, p.repeat, p.mode)] for p in cp]
        metrics = {m: paired_summary([getattr(p, m) for p in cp], confidence) for m in METRIC_UNITS}
        side_summ = {
            "base_wall_s": [p.base_wall_s for p in cp],
            "mode_wall_s": [p.mode_wall_s for p in cp],
            "base_steps_per_s": [p.base_steps_per_s for p in cp],
            "mode_steps_per_s": [p.mode_steps_per_s for p in cp],
            "base_step_ms": [p.base_step_ms for p in cp],
            "mode_step_ms": [p.mode_step_ms for p in cp],
            "base_startup_s": [to_float(b["startup_s"]) for b, _ in cs],
            "mode_startup_s": [to_float(x["startup_s"]) for _, x in cs],
        }
        role = role_of(mode, baseline)
        all_rows = [r for r in records if str(r.get("condition_id")) == cond and r.get("mode") in (mode, baseline)]
        drafts.append(
            Comparison(
                condition_id=cond,
                condition=_condition(all_rows),
                mode=mode,
                baseline=baseline,
                role=role,
                stop_kind=_first_str(all_rows, "stop_kind"),
                sweep_dirs=tuple(sorted({p.sweep_dir for p in cp} | {e.sweep_dir for e in cx})),
                n_pairs=len(cp),
                metrics=metrics,
                sides={k: paired_summary(v, confidence) for k, v in side_summ.items()},
                verdict=verdict_for(metrics, budget_pct),
                order_effects=order_effects(cp),
                stability=(
                    stability(baseline, [b for b, _ in cs]),
                    stability(mode, [x for _, x in cs]),
                ),
                excluded=cx,
                host_mismatch=tuple(f"{p.sweep_dir} repeat {p.repeat}" for p in cp if p.hosts_differ),
                calibration=calibration(cp, cs, calibration_tolerance_pct) if role == "calibration" else None,
                noise_floor_pct=None,
                noise_floor_source=None,
                pairs=tuple(cp),
            )
        )
    floors = {
        c.condition_id: c.metrics["throughput_overhead_pct"].half_width
        for c in drafts
        if c.role == "aa" and math.isfinite(c.metrics["throughput_overhead_pct"].half_width)
    }
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
        baseline=baseline,
        budget_pct=budget_pct,
        confidence=confidence,
        comparisons=tuple(comparisons),
        failed_trials=failed,
        n_trials=len(records),
        n_ok=sum(1 for r in records if r.get("status") == "ok"),
        noise_floors=floors,
        methods={
            "interval": f"{confidence:.0%} {INTERVAL_METHOD}",
            "test": TEST_METHOD,
            "mde": MDE_METHOD,
            "pairing": "by (sweep_dir, condition_id, repeat)",
        },
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for prop in ("half_width", "difference", "all_within", "n_excluded", "label"):
            if isinstance(getattr(type(value), prop, None), property):
                out[prop] = _jsonable(getattr(value, prop))
        return out
    if hasattr(value, "item"):
        return _jsonable(value.item())
    return value


def analysis_to_dict(analysis: Analysis) -> dict[str, Any]:
    """The analysis as its ``analysis.json`` record (:mod:`ddpbench.formats.analysis_record`; NaN → null)."""
    return build_analysis_record(_jsonable(analysis))
