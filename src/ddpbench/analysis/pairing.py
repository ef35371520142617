"""Pairing: the baseline's trial against each other mode's trial of the same key, and each pair's figures.

A pair is excluded, with its reason, when a side is missing, not ``ok``, lacks its wall time, or ran another
workload. A figure a side lacks leaves that metric NaN for the pair: unknown is never counted as zero."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ddpbench.analysis.efficiency import workload_of
from ddpbench.analysis.figures import THROUGHPUT_KINDS, finite, step_ms, throughput
from ddpbench.analysis.results import ExcludedPair, PairRecord
from ddpbench.analysis.stats import to_float
from ddpbench.analysis.switching import full_on_row
from ddpbench.choices import TrialStatus

#: figures both sides of a pair must have; every other figure may be unknown
REQUIRED_FIGURES = ("wall_s",)
NAN = math.nan

Sides = dict[tuple[str, str, int, str], tuple[dict, dict]]


def str_or_none(value: Any) -> str | None:
    """``value`` as text; None for None and NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _hosts(value: Any) -> frozenset[str]:
    text = str_or_none(value)
    return frozenset(h for h in text.split(",") if h) if text else frozenset()


def _pick(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Among duplicate trials of one mode and key prefer an ok one, then the latest ended."""
    return max(rows, key=lambda r: (r.get("status") == TrialStatus.ok, str_or_none(r.get("ended_at")) or ""))


def _side_problem(row: dict[str, Any] | None, label: str) -> str | None:
    if row is None:
        return f"no {label} trial"
    if row.get("status") != TrialStatus.ok:
        err = str_or_none(row.get("error"))
        return f"{label} trial {row.get('status')}" + (f": {err}" if err else "")
    missing = [k for k in REQUIRED_FIGURES if not math.isfinite(to_float(row.get(k)))]
    if missing:
        return f"{label} trial lacks {', '.join(missing)}"
    return None


def _pct(x: float | None, b: float | None) -> float:
    return 100.0 * (x / b - 1.0) if x is not None and b else NAN


def _diff(x: float | None, b: float | None) -> float:
    return x - b if x is not None and b is not None else NAN


def _rates(b: dict[str, Any], x: dict[str, Any]) -> tuple[float | None, float | None, float | None, float | None]:
    """(base steps/s, mode steps/s, base rate, mode rate): rates in the first kind both sides have."""
    rates = ((throughput(b, kind), throughput(x, kind)) for kind in THROUGHPUT_KINDS)
    rb, rx = next(((rb, rx) for rb, rx in rates if rb and rx), (None, None))
    return throughput(b, "steps_per_s"), throughput(x, "steps_per_s"), rb, rx


def pair_record(b: dict[str, Any], x: dict[str, Any], mode: str) -> PairRecord:
    """The figures and per-pair metrics of one included pair (NaN where a side lacks a figure)."""
    bw, xw = finite(b["wall_s"]), finite(x["wall_s"])
    bs, xs, rb, rx = _rates(b, x)
    bm, xm = step_ms(b), step_ms(x)
    bmed, xmed = finite(b.get("step_time_ms_median")), finite(x.get("step_time_ms_median"))
    b_start, x_start = finite(b.get("startup_s")), finite(x.get("startup_s"))
    b_tear, x_tear = finite(b.get("teardown_s")), finite(x.get("teardown_s"))
    nan_or = lambda v: NAN if v is None else v  # noqa: E731
    startup_diff, teardown_diff = _diff(x_start, b_start), _diff(x_tear, b_tear)
    return PairRecord(
        sweep_dir=str(b["sweep_dir"]), condition_id=str(b["condition_id"]), repeat=int(b["repeat"]), mode=mode,
        base_wall_s=nan_or(bw), mode_wall_s=nan_or(xw), base_steps_per_s=nan_or(bs), mode_steps_per_s=nan_or(xs),
        base_step_ms=nan_or(bm), mode_step_ms=nan_or(xm),
        mode_position=int(to_float(x.get("pair_position"))), base_position=int(to_float(b.get("pair_position"))),
        hosts_differ=_hosts(b.get("env_hostnames")) != _hosts(x.get("env_hostnames")),
        wall_overhead_pct=_pct(xw, bw), throughput_overhead_pct=100.0 * (rb / rx - 1.0) if rb and rx else NAN,
        step_overhead_ms=_diff(xm, bm), step_overhead_pct=_pct(xm, bm),
        startup_diff_s=startup_diff, train_diff_s=_diff(finite(x.get("train_s")), finite(b.get("train_s"))),
        teardown_diff_s=teardown_diff, wall_diff_s=_diff(xw, bw),
        step_median_overhead_ms=_diff(xmed, bmed), step_median_overhead_pct=_pct(xmed, bmed),
        startup_diff_pct=_pct(x_start, b_start), teardown_diff_pct=_pct(x_tear, b_tear),
        fixed_diff_s=startup_diff + teardown_diff,
        switched_step_overhead_ms=nan_or(finite(x.get("switched_step_overhead_ms"))),
        switched_step_overhead_pct=nan_or(finite(x.get("switched_step_overhead_pct"))),
    )


def _grouped(frame: pd.DataFrame) -> dict[tuple[str, str], dict[int, dict[str, list[dict[str, Any]]]]]:
    """(sweep_dir, condition_id) → repeat → mode → rows."""
    out: dict[tuple[str, str], dict[int, dict[str, list[dict[str, Any]]]]] = {}
    for row in (full_on_row(r) for r in frame.to_dict("records")):
        key = (str(row["sweep_dir"]), str(row["condition_id"]))
        out.setdefault(key, {}).setdefault(int(row["repeat"]), {}).setdefault(str(row["mode"]), []).append(row)
    return out


def pair_table(frame: pd.DataFrame, baseline: str = "native") -> tuple[list[PairRecord], list[ExcludedPair], Sides]:
    """Pair every non-baseline mode's trials with the baseline's, within the (sweep_dir, condition_id) groups it ran
    in: ``(pairs, excluded, sides)``, ``sides`` the (baseline row, mode row) of each included pair."""
    pairs: list[PairRecord] = []
    excluded: list[ExcludedPair] = []
    sides: Sides = {}
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
                if not problems and b is not None and x is not None and workload_of(b) != workload_of(x):
                    problems.append(f"sides ran different workloads ({workload_of(b)}, {workload_of(x)})")
                if problems:
                    excluded.append(ExcludedPair(sweep, cond, repeat, mode, "; ".join(problems)))
                    continue
                assert b is not None and x is not None
                pairs.append(pair_record(b, x, mode))
                sides[(sweep, cond, repeat, mode)] = (b, x)
    return pairs, excluded, sides
