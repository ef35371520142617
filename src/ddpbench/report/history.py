"""``ddpbench-report --history``: the history across sweeps as ``history.md``, ``plots/history.png`` and
``index.html`` (figures from :mod:`ddpbench.analysis.history`; every file written atomically)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ddpbench.analysis.history import History
from ddpbench.io import write_text_atomic
from ddpbench.report.history_page import render_history_page
from ddpbench.report.history_plots import history_plot
from ddpbench.report.plots import save_figure
from ddpbench.report.versions import interval

__all__ = ["HistoryFiles", "history_markdown", "write_history"]


@dataclass(frozen=True)
class HistoryFiles:
    """What :func:`write_history` wrote."""

    markdown: Path
    plot: Path
    page: Path


def history_markdown(history: History, plot_ref: str) -> str:
    """``history.md``: the points in order with their intervals, the first point of each new level flagged."""
    lines = ["# Overhead history", "",
             "Sweeps with the same hardware (CPU model, GPUs) and condition, by tool version then date. A step "
             "change marks the first point of a new level, found by a change-point method that weighs each point "
             f"by its interval (false-alarm rate {100 * history.alpha:g} % per series; docs/versions.md). "
             "The page index.html shows the same with plots per series.", "",
             "| hardware | condition | mode | version | date | per-step overhead (ms) | projected (%) | pairs | "
             "step change | sweep |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for p in history.points:
        hardware = " + ".join(x for x in p.series[:2] if x) or "unknown"
        lines.append(f"| {hardware} | {p.series[2]} | {p.series[3]} | {p.version} | {p.date} | {interval(p.step_ms)} | "
                     f"{interval(p.projected_pct, 2)} | {p.step_ms.n} | {'**yes**' if p.step_change else ''} | "
                     f"{p.sweep_dir} |")
    if history.changes:
        lines += ["", "Steps (per-step overhead, ms, after − before with its 95 % interval):", ""]
        lines += [f"- {c.kind}: {c.series[3]} [{c.series[2]}] {c.before.version} ({c.before.date}) → "
                  f"{c.after.version} ({c.after.date}): {c.step.delta:+.3f} [{c.step.ci_low:+.3f}, "
                  f"{c.step.ci_high:+.3f}], p = {c.step.p_value:.3f}" for c in history.changes]
    lines += ["", f"![history]({plot_ref})", ""]
    return "\n".join(lines)


def write_history(history: History, out: Path, generated: str, ddpbench_version: str,
                  sweep_dirs: Sequence[str]) -> HistoryFiles:
    """Write ``history.md``, ``plots/history.png`` and ``index.html`` into ``out``."""
    plot = save_figure(history_plot(history.points), out / "plots" / "history.png")
    markdown = write_text_atomic(out / "history.md", history_markdown(history, os.path.relpath(plot, out)))
    page = write_text_atomic(out / "index.html",
                             render_history_page(history, generated, ddpbench_version, sweep_dirs))
    return HistoryFiles(markdown, plot, page)
