"""The history's figures: every series on one plot (history.md), and one series' two panels (the history page).

Text from the records is drawn literally (:func:`literal`): ``$`` would otherwise start matplotlib's math mode.
"""

from __future__ import annotations

import base64
import io
import math
from typing import List, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ddpbench.analysis.changepoint import ChangePoints  # noqa: E402
from ddpbench.analysis.history import HistoryPoint  # noqa: E402
from ddpbench.analysis.stats import PairedSummary  # noqa: E402
from ddpbench.report.plots import RC, colors  # noqa: E402


def literal(text: str) -> str:
    """``text`` as matplotlib draws it literally (no math mode)."""
    return text.replace("$", r"\$")


def _errors(values: Sequence[PairedSummary]) -> List[float]:
    return [s.half_width if math.isfinite(s.half_width) else 0.0 for s in values]


def _labels(points: Sequence[HistoryPoint]) -> List[str]:
    return [literal(f"{p.version}\n{p.date}") for p in points]


def history_plot(points: Sequence[HistoryPoint]) -> Figure:
    """Per-step overhead (ms, 95 % interval) over versions, one line per series; the first point of a new level in red."""
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(7, 3.6))
        every = list(dict.fromkeys(p.series for p in points))
        for series, color in zip(every, colors(len(every))):
            chosen = [p for p in points if p.series == series]
            xs = list(range(len(chosen)))
            ax.errorbar(xs, [p.step_ms.mean for p in chosen], yerr=_errors([p.step_ms for p in chosen]), marker="o",
                        capsize=4, color=color, label=literal(f"{series[3]} [{series[2]}]"))
            for x, p in zip(xs, chosen):
                if p.step_change:
                    ax.plot([x], [p.step_ms.mean], "s", color="red", markersize=10, fillstyle="none")
            ax.set_xticks(xs, _labels(chosen), fontsize=7)
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_ylabel("per-step overhead vs baseline (ms)")
        ax.set_title("Overhead history (red square: a step just before)")
        if every:
            ax.legend(fontsize=7)
    return fig


def _panel(ax: Axes, points: Sequence[HistoryPoint], values: Sequence[PairedSummary], ylabel: str, color: str,
           fit: ChangePoints | None) -> None:
    xs = list(range(len(points)))
    ax.errorbar(xs, [v.mean for v in values], yerr=_errors(values), marker="o", capsize=4, color=color,
                linestyle="none")
    if fit is not None:
        for first, last, level in fit.levels:
            ax.hlines(level, first - 0.3, last + 0.3, color=color, linewidth=2, alpha=0.5)
        for step in fit.steps:
            ax.axvline(step.index - 0.5, color="#c44e52", linestyle="--", linewidth=1.2)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xticks(xs, _labels(points), fontsize=8)
    ax.set_ylabel(ylabel, fontsize=10)


def series_plot(points: Sequence[HistoryPoint], fit: ChangePoints | None) -> Figure:
    """One series: per-step overhead (ms) with its levels and steps, and the projected overhead (% of the job)."""
    with plt.rc_context(RC):
        width = min(14.0, 4.0 + 0.8 * len(points))
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(width, 5.4), sharex=True)
        first, second = colors(2)
        _panel(top, points, [p.step_ms for p in points], "per-step overhead (ms)", first, fit)
        top.set_title("95 % intervals; bars: levels between steps; dashed red: a step", fontsize=10)
        _panel(bottom, points, [p.projected_pct for p in points], "projected overhead (% of job)", second, None)
        fig.tight_layout()
    return fig


def png_base64(fig: Figure) -> str:
    """``fig`` as a base64 PNG (for a ``data:`` URI); the figure is closed."""
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    finally:
        plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
