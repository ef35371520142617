"""Plots that compare: where the step time goes per mode (phases), and every tool's per-step overhead.

- ``phases``: stacked bars of the mean ms per phase (``timing=phase``) of each mode in a condition,
  over its ok trials;
- ``tools``: each tool comparison's mean per-step overhead (ms) with its 95 % paired t interval as
  an error bar, smallest first (the order of :func:`ddpbench.analysis.tools.tool_ranking`).

Figures only; files are written by :func:`ddpbench.report.plots.save_figure`.
"""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ddpbench.analysis.results import Comparison  # noqa: E402
from ddpbench.formats.rank_record import PHASES  # noqa: E402
from ddpbench.report.style import RC, colors  # noqa: E402

__all__ = ["has_phases", "phase_plot", "tool_plot"]


def has_phases(trials: pd.DataFrame) -> bool:
    """True when some ok trial of ``trials`` has per-phase times."""
    column = f"phase_time_ms_{PHASES[0]}_mean"
    return column in trials.columns and bool(trials.loc[trials["status"] == "ok", column].notna().any())


def phase_plot(trials: pd.DataFrame, baseline: str) -> Figure:
    """Mean ms per phase of each mode's ok trials, stacked (one bar per mode, baseline first)."""
    ok = trials[(trials["status"] == "ok") & trials[f"phase_time_ms_{PHASES[0]}_mean"].notna()]
    modes = sorted(set(ok["mode"]), key=lambda m: (m != baseline, m))
    means = {m: [float(ok.loc[ok["mode"] == m, f"phase_time_ms_{p}_mean"].astype(float).mean()) for p in PHASES]
             for m in modes}
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(modes) + 3), 4))
        bottom = [0.0] * len(modes)
        for i, (phase, color) in enumerate(zip(PHASES, colors(len(PHASES)))):
            values = [0.0 if math.isnan(means[m][i]) else means[m][i] for m in modes]
            ax.bar(modes, values, bottom=bottom, color=color, label=phase)
            bottom = [b + v for b, v in zip(bottom, values)]
        for x, total in enumerate(bottom):
            ax.text(x, total, f"{total:.2f} ms", ha="center", va="bottom", fontsize=8)
        ax.set_ylabel("mean time per step (ms)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), title="phase", fontsize=8)
        ax.set_title("Where the step time goes, per mode (timing=phase: intrusive on CUDA)", fontsize=10)
    return fig


def tool_plot(ranked: Sequence[Comparison]) -> Figure:
    """Per-step overhead (ms) of every tool with its 95 % interval, smallest first."""
    labels, means, lows, highs = [], [], [], []
    several = len({c.condition_id for c in ranked}) > 1
    for c in ranked:
        s = c.metrics["step_overhead_ms"]
        labels.append(f"{c.mode}\n{c.condition_id}" if several else c.mode)
        means.append(s.mean)
        lows.append(s.mean - s.ci_low if math.isfinite(s.ci_low) else 0.0)
        highs.append(s.ci_high - s.mean if math.isfinite(s.ci_high) else 0.0)
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(7, max(2.5, 0.6 * len(labels) + 1.2)))
        ys = list(range(len(labels)))
        ax.barh(ys, [0.0 if math.isnan(m) else m for m in means], color=colors(len(labels)), alpha=0.6)
        ax.errorbar([0.0 if math.isnan(m) else m for m in means], ys, xerr=[lows, highs], fmt="o", color="black",
                    capsize=4)
        ax.axvline(0.0, color="grey", linewidth=1)
        ax.set_yticks(ys, labels)
        ax.invert_yaxis()
        base = ranked[0].baseline if ranked else "baseline"
        ax.set_xlabel(f"per-step overhead vs {base} (ms; bar: 95 % paired t interval)")
        ax.set_title("Tools compared: per-step cost", fontsize=10)
    return fig
