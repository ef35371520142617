"""PNG plots for the report (matplotlib, Agg backend; each file written atomically; the look in :mod:`.style`).

One set per condition:

- ``slope_<mode>``: paired slope plot, one line per repeat from the baseline to the mode, for
  wall time (s) and throughput (steps/s);
- ``step_time``: the distribution of every timed step per mode (rank 0's ``step_times_ms``), one
  violin per repeat; without per-step arrays, each trial's p10–p90 bar, median dot and p99 tick;
- ``wall_decomposition``: startup / train / teardown seconds stacked, per trial;
- ``throughput``: steps/s per repeat, one line per mode;
- ``phases`` (``timing=phase`` only): stacked mean ms per phase per mode (:mod:`.plots_compare`).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from pathlib import Path
from typing import Literal

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ddpbench.analysis.paired import Comparison  # noqa: E402
from ddpbench.collect.collector import load_step_times  # noqa: E402
from ddpbench.io import atomic_path  # noqa: E402
from ddpbench.report.plots_compare import has_phases, phase_plot  # noqa: E402
from ddpbench.report.plots_switching import block_plot, has_blocks  # noqa: E402
from ddpbench.report.style import RC, colors  # noqa: E402

__all__ = ["plot_condition", "save_figure", "slug"]


#: longest slug, characters: a plot's file name stays well under the 255-byte limit of file systems
SLUG_MAX = 120


def slug(text: str) -> str:
    """A file-name-safe form of ``text``, at most :data:`SLUG_MAX` characters (a long one ends in a hash)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "all"
    if len(safe) <= SLUG_MAX:
        return safe
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{safe[:SLUG_MAX - 13]}-{digest}"


def save_figure(fig: Figure, path: Path) -> Path:
    """Save ``fig`` as PNG at ``path``, atomically (:func:`ddpbench.io.atomic_path`)."""
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def _mode_order(modes: list[str], baseline: str) -> list[str]:
    return sorted(set(modes), key=lambda m: (m != baseline, m))


def slope_plot(comparison: Comparison) -> Figure:
    """Baseline → mode per repeat, wall seconds and steps/s side by side."""
    several_sweeps = len(comparison.sweep_dirs) > 1
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, 2, figsize=(9, 4))
        for ax, label, sides in ((axes[0], "wall time (s)", lambda p: (p.base_wall_s, p.mode_wall_s)),
                                 (axes[1], "throughput (steps/s)", lambda p: (p.base_steps_per_s, p.mode_steps_per_s))):
            for p, color in zip(comparison.pairs, colors(len(comparison.pairs))):
                tag = f"{Path(p.sweep_dir).name} r{p.repeat}" if several_sweeps else f"r{p.repeat}"
                ax.plot([0, 1], list(sides(p)), marker="o", color=color, label=tag)
            ax.set_xticks([0, 1], [comparison.baseline, comparison.mode])
            ax.set_xlim(-0.2, 1.2)
            ax.set_ylabel(label)
        axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), title="repeat")
        fig.suptitle(f"{comparison.mode} vs {comparison.baseline}, paired per repeat\n{comparison.condition_id}", fontsize=10)
        fig.subplots_adjust(wspace=0.4)
    return fig


def _half_violin(ax: Axes, values: list[float], x: float, width: float, side: str, color: str) -> None:
    """One violin of ``values`` at ``x`` (``side``: "both", "left" or "right" half), its quartiles dashed; a
    line where the values are all one (no density to draw)."""
    def span(half: float) -> tuple[float, float]:  # a horizontal line across the drawn side(s)
        return (x - half if side != "right" else x, x + half if side != "left" else x)

    if len(set(values)) < 2:
        ax.hlines(values[0], *span(width / 2), colors=color, linewidth=2)
        return
    parts = ax.violinplot([values], positions=[x], widths=width, showextrema=False)
    body = parts["bodies"][0]  # type: ignore[index]  # a dict of artists, typed as a Collection
    path = body.get_paths()[0]
    left_edge = path.vertices[path.vertices[:, 0] <= x]
    order = np.argsort(left_edge[:, 1])
    edge_y, edge_half_width = left_edge[order, 1], x - left_edge[order, 0]
    if side == "left":
        path.vertices[:, 0] = np.minimum(path.vertices[:, 0], x)
    elif side == "right":
        path.vertices[:, 0] = np.maximum(path.vertices[:, 0], x)
    body.set_facecolor(color)
    body.set_edgecolor(".25")
    body.set_alpha(1.0)
    quartile_styles: tuple[tuple[float, Literal[":", "--"]], ...] = ((0.25, ":"), (0.5, "--"), (0.75, ":"))
    for q, style in quartile_styles:
        y = float(np.quantile(values, q))
        half = float(np.interp(y, edge_y, edge_half_width))  # the violin's half-width there: the dash stays inside
        ax.hlines(y, *span(half), colors=".25", linestyles=style, linewidth=1)


def step_distribution_plot(steps: pd.DataFrame, baseline: str) -> Figure:
    """Every timed step (ms) per repeat and mode, as violins (split when two modes) clipped at the 99.5th
    percentile, each scaled to the same width."""
    modes = _mode_order(steps["mode"].tolist(), baseline)
    cap = float(steps["step_ms"].quantile(0.995))
    shown = steps[steps["step_ms"] <= cap]
    repeats = sorted(shown["repeat"].unique())
    split = len(modes) == 2
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(8, 4))
        for i, (mode, color) in enumerate(zip(modes, colors(len(modes)))):
            for x, repeat in enumerate(repeats):
                values = shown.loc[(shown["mode"] == mode) & (shown["repeat"] == repeat), "step_ms"].astype(float)
                if values.empty:
                    continue
                if split:
                    _half_violin(ax, values.tolist(), x, 0.8, "left" if i == 0 else "right", color)
                else:
                    width = 0.8 / len(modes)
                    _half_violin(ax, values.tolist(), x + (i - (len(modes) - 1) / 2) * width, width, "both", color)
            ax.fill_between([], [], color=color, label=mode)  # the legend's entry
        ax.set_xticks(range(len(repeats)), [f"r{r}" for r in repeats])
        ax.set_xlabel("repeat")
        ax.set_ylabel("step time (ms)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title="mode")
        ax.set_title(f"Every timed step of rank 0 (dashes: quartiles; steps above {cap:.1f} ms, "
                     "the top 0.5 %, not drawn)", fontsize=9)
    return fig


def step_time_plot(trials: pd.DataFrame, baseline: str) -> Figure:
    """Per-trial step-time spread (ms): p10–p90 bar, median dot, p99 tick, grouped by mode."""
    ok = trials[trials["status"] == "ok"].dropna(subset=["step_time_ms_median"])
    modes = _mode_order(ok["mode"].tolist(), baseline)
    palette = dict(zip(modes, colors(len(modes))))
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(8, 4))
        repeats = sorted(ok["repeat"].unique())
        width = 0.8 / max(1, len(modes))
        for i, mode in enumerate(modes):
            sub = ok[ok["mode"] == mode]
            xs = [repeats.index(r) + (i - (len(modes) - 1) / 2) * width for r in sub["repeat"]]
            color = palette[mode]
            ax.vlines(xs, sub["step_time_ms_p10"], sub["step_time_ms_p90"], color=color, linewidth=5, alpha=0.45)
            ax.scatter(xs, sub["step_time_ms_median"], color=color, zorder=3, label=f"{mode} median (bar p10–p90)")
            ax.scatter(xs, sub["step_time_ms_p99"], color=color, marker="_", s=120, zorder=3)
        ax.set_xticks(range(len(repeats)), [f"r{r}" for r in repeats])
        ax.set_xlabel("repeat")
        ax.set_ylabel("step time (ms)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        ax.set_title("Step-time distribution per trial (tick: p99)", fontsize=10)
    return fig


def wall_decomposition_plot(trials: pd.DataFrame, baseline: str) -> Figure:
    """Startup / train / teardown seconds of each ok trial, stacked horizontally."""
    ok = trials[trials["status"] == "ok"].copy()
    order = {m: i for i, m in enumerate(_mode_order(ok["mode"].tolist(), baseline))}
    ok = ok.sort_values(["repeat", "mode"], key=lambda s: s.map(order) if s.name == "mode" else s)
    labels = [f"r{r} {m}" for r, m in zip(ok["repeat"], ok["mode"])]
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(8, max(2.5, 0.35 * len(ok) + 1)))
        left = pd.Series(0.0, index=ok.index)
        for color, part in zip(colors(3), ("startup_s", "train_s", "teardown_s")):
            values = ok[part].astype(float).fillna(0.0)
            ax.barh(labels, values, left=left, color=color, label=part.removesuffix("_s"))
            left = left + values
        for y, (start, end) in enumerate(zip(ok["startup_s"].astype(float), ok["teardown_s"].astype(float))):
            ax.text(left.iloc[y], y, f"  start {start:.1f} s, teardown {end:.1f} s", va="center", fontsize=7)
        ax.set_xlim(0, float(left.max()) * 1.35 if len(left) else 1.0)
        ax.invert_yaxis()
        ax.set_xlabel("seconds")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.set_title("Wall time decomposition per trial", fontsize=10)
    return fig


def throughput_plot(trials: pd.DataFrame, baseline: str) -> Figure:
    """steps/s per repeat, one line per mode."""
    ok = trials[trials["status"] == "ok"]
    modes = _mode_order(ok["mode"].tolist(), baseline)
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(7, 4))
        for mode, color, marker in zip(modes, colors(len(modes)), itertools.cycle("osDv^<>ph*")):
            rows = ok[ok["mode"] == mode].sort_values("repeat")
            ax.plot(rows["repeat"], rows["steps_per_s"].astype(float), marker=marker, color=color, label=mode)
        ax.set_xticks(sorted(ok["repeat"].unique()))
        ax.set_xlabel("repeat")
        ax.set_ylabel("throughput (steps/s)")
        ax.legend(title="mode")
        ax.set_title("Throughput per repeat", fontsize=10)
    return fig


def plot_condition(
    trials: pd.DataFrame, comparisons: list[Comparison], out_dir: Path, baseline: str
) -> dict[str, Path]:
    """Write every plot for one condition into ``out_dir``; returns ``{name: path}``.

    ``trials`` are that condition's rows of the collected table; names are ``slope_<mode>``,
    ``step_time``, ``wall_decomposition``, ``throughput``, with ``timing=phase`` ``phases``, and with
    ``switching=blocks`` ``blocks``.
    """
    cond = comparisons[0].condition_id if comparisons else str(trials["condition_id"].iloc[0])
    stem = slug(cond)
    written: dict[str, Path] = {}
    for c in comparisons:
        if c.pairs:
            written[f"slope_{c.mode}"] = save_figure(slope_plot(c), out_dir / f"{stem}-slope-{slug(c.mode)}.png")
    ok = trials[trials["status"] == "ok"]

    def known(column: str) -> bool:  # a figure without data (a script without records) is not drawn
        return column in ok.columns and bool(ok[column].notna().any())

    if not ok.empty:
        steps = load_step_times(trials)
        if not steps.empty or known("step_time_ms_median"):
            figure = step_distribution_plot(steps, baseline) if not steps.empty else step_time_plot(trials, baseline)
            written["step_time"] = save_figure(figure, out_dir / f"{stem}-step-time.png")
        if known("train_s"):
            written["wall_decomposition"] = save_figure(
                wall_decomposition_plot(trials, baseline), out_dir / f"{stem}-wall-decomposition.png"
            )
        if known("steps_per_s"):
            written["throughput"] = save_figure(throughput_plot(trials, baseline), out_dir / f"{stem}-throughput.png")
        if has_phases(trials):
            written["phases"] = save_figure(phase_plot(trials, baseline), out_dir / f"{stem}-phases.png")
        if has_blocks(trials):
            written["blocks"] = save_figure(block_plot(trials, baseline), out_dir / f"{stem}-blocks.png")
    return written
