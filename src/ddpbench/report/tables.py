"""Markdown tables of the report (headline per condition, the tools, figure rows): absolute figures first, their %
second; a % the analysis left out is ``—`` with its note; a figure no trial measured is ``unknown``, never 0.
"""

from __future__ import annotations

import math
from typing import Sequence

from ddpbench.analysis.caveats import fmt
from ddpbench.analysis.results import Comparison, FigureGroup, RobustInterval
from ddpbench.analysis.stats import PairedSummary
from ddpbench.choices import Role

UNKNOWN = "unknown"


def ci(s: PairedSummary | None, unit: str = "", digits: int = 2, sign: bool = True) -> str:
    """``mean unit [lo, hi]``, ``mean unit (n=1)`` without an interval, ``unknown`` when nothing was measured."""
    if s is None or s.n == 0:
        return UNKNOWN
    head = f"{fmt(s.mean, digits, sign)}{unit}"
    if not math.isfinite(s.ci_low):
        return f"{head} (n={s.n})"
    return f"{head} [{fmt(s.ci_low, digits, sign)}, {fmt(s.ci_high, digits, sign)}]"


def pm(s: PairedSummary | None, digits: int = 2) -> str:
    """``mean ± t half-width`` of a side's figure; ``unknown`` when not measured."""
    if s is None or s.n == 0:
        return UNKNOWN
    if not math.isfinite(s.half_width):
        return fmt(s.mean, digits)
    return f"{fmt(s.mean, digits)} ± {fmt(s.half_width, digits)}"


def robust_text(r: RobustInterval | None, digits: int = 3) -> str:
    """``HL [lo, hi] (level %)``: Hodges–Lehmann estimate, Wilcoxon interval and its achieved level."""
    if r is None or r.n == 0:
        return UNKNOWN
    if not math.isfinite(r.ci_low):
        return f"{fmt(r.estimate, digits, True)} (n={r.n})"
    return (f"{fmt(r.estimate, digits, True)} [{fmt(r.ci_low, digits, True)}, {fmt(r.ci_high, digits, True)}] "
            f"({100 * r.achieved_confidence:.1f} %)")


def _pct_cell(c: Comparison, name: str, digits: int = 2) -> str:
    return "—" if name in c.pct_notes else ci(c.metrics.get(name), digits=digits)


def verdict_cell(c: Comparison) -> str:
    """The verdict of a tool comparison; the role of the others."""
    return c.verdict.status if c.role == Role.tool else {Role.aa: "A/A (noise floor)", Role.calibration: "calibration"}[c.role]


def headline(comparisons: Sequence[Comparison], job_hours: float) -> list[str]:
    """One condition's table: per-step Δ (mean, then median as HL/Wilcoxon), throughput, the trials' wall, fixed
    costs, the overhead over a ``job_hours`` job, verdict."""
    base = comparisons[0].baseline if comparisons else "native"
    lines = [
        f"| mode | pairs (excl.) | {base} step ms | per-step Δ ms | per-step Δ % | median step Δ ms, HL [Wilcoxon] | "
        f"throughput overhead % | trial wall Δ s | trial wall overhead % | startup Δ s | teardown Δ s | fixed Δ s | "
        f"over a {job_hours:g} h job % | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        lines.append(
            f"| {c.mode} | {c.n_pairs} ({c.n_excluded}) | {pm(c.sides.get('base_step_ms'), 3)} | "
            f"{ci(c.metrics.get('step_overhead_ms'), digits=3)} | {_pct_cell(c, 'step_overhead_pct')} | "
            f"{robust_text(c.robust.get('step_median_overhead_ms'))} | {ci(c.metrics.get('throughput_overhead_pct'))} | "
            f"{ci(c.metrics.get('wall_diff_s'))} | {_pct_cell(c, 'wall_overhead_pct')} | "
            f"{ci(c.metrics.get('startup_diff_s'))} | {ci(c.metrics.get('teardown_diff_s'))} | "
            f"{ci(c.metrics.get('fixed_diff_s'))} | {_pct_cell(c, 'projected_overhead_pct')} | {verdict_cell(c)} |"
        )
    lines.append("")
    for c in comparisons:
        for name, note in c.pct_notes.items():
            lines.append(f"- {c.mode}: `{name}` not shown — {note}.")
    return lines + ([""] if any(c.pct_notes for c in comparisons) else [])


def _memory_cell(c: Comparison) -> str:
    parts = [f"{row.name}: {ci(row.diff, ' MB', 1)}"
             + ("" if row.pct is None else f" ({fmt(row.pct.mean, 1, True)} %)")
             for row in c.rows if row.group == FigureGroup.memory]
    return "; ".join(parts) or UNKNOWN


def tool_table(ranked: Sequence[Comparison], job_hours: float) -> list[str]:
    """Every tool against the baseline in one table, in the order given (per-step overhead, smallest first)."""
    if not ranked:
        return []
    base = ranked[0].baseline
    several = len({c.condition_id for c in ranked}) > 1
    lines = [
        f"| tool | {'condition | ' if several else ''}pairs | per-step Δ ms | per-step Δ % | throughput overhead % | "
        f"trial wall Δ s | trial wall overhead % | startup Δ s | teardown Δ s | over a {job_hours:g} h job % | "
        f"peak memory Δ | verdict (vs {base}) |",
        "|---|" + ("---|" if several else "") + "---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in ranked:
        cond = f"`{c.condition_id}` | " if several else ""
        lines.append(
            f"| {c.mode} | {cond}{c.n_pairs} | {ci(c.metrics.get('step_overhead_ms'), digits=3)} | "
            f"{_pct_cell(c, 'step_overhead_pct')} | {ci(c.metrics.get('throughput_overhead_pct'))} | "
            f"{ci(c.metrics.get('wall_diff_s'))} | {_pct_cell(c, 'wall_overhead_pct')} | "
            f"{ci(c.metrics.get('startup_diff_s'))} | {ci(c.metrics.get('teardown_diff_s'))} | "
            f"{_pct_cell(c, 'projected_overhead_pct')} | {_memory_cell(c)} | "
            f"**{c.verdict.status}** |"
        )
    return lines + [""]


def figure_rows_table(comparisons: Sequence[Comparison], group: FigureGroup, what: str) -> list[str]:
    """The comparisons' rows of one group (``what``: the head of its name column): both sides, Δ with intervals,
    Δ %."""
    rows = [(c, r) for c in comparisons for r in c.rows if r.group == group]
    if not rows:
        return []
    base = comparisons[0].baseline
    lines = [
        f"| mode | {what} | {base} | with the mode | Δ [95 % CI] | Δ HL [Wilcoxon] | Δ % [95 % CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    notes = []
    for c, r in rows:
        unit = f" {r.unit}" if r.unit else ""
        digits = 3 if r.unit == "ms" else 2
        pct = ci(r.pct, digits=2) if r.pct is not None else "—"
        lines.append(
            f"| {c.mode} | {r.name}{f' ({r.unit})' if r.unit else ''} | {pm(r.base, digits)} | {pm(r.mode, digits)} | "
            f"{ci(r.diff, unit, digits)} | {robust_text(r.robust, digits)} | {pct} |"
        )
        if r.note and r.diff.n:
            notes.append(f"- {c.mode}, {r.name}: no % — {r.note}.")
    return lines + [""] + notes + ([""] if notes else [])

