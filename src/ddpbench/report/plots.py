"""The report's PNG plots (matplotlib, Agg backend; each file written atomically).

Per condition: ``slope_<mode>``, ``step_time``, ``wall_decomposition``, ``throughput``, with ``timing=phase``
``phases``, with ``switching=blocks`` ``blocks``; across conditions: the tools compared.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any, Literal, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ddpbench.analysis.paired import Comparison  # noqa: E402
from ddpbench.choices import TrialStatus
from ddpbench.collect.collector import load_step_times  # noqa: E402
from ddpbench.formats.rank_record import PHASES  # noqa: E402
from ddpbench.io import atomic_path  # noqa: E402

#: seaborn's "deep" palette, in its order, and the rc settings of its whitegrid style in its notebook context
#: (sizes in points): seaborn's look without importing it (and through it scipy.stats: a second of start-up)
PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3",
           "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"]
RC: dict[Any, Any] = {
    "axes.axisbelow": True, "axes.edgecolor": ".8", "axes.grid": True, "axes.labelcolor": ".15",
    "axes.labelsize": 12.0, "axes.linewidth": 1.25, "axes.titlesize": 12.0,
    "font.size": 12.0, "grid.color": ".8", "grid.linewidth": 1.0, "legend.fontsize": 11.0,
    "legend.title_fontsize": 12.0, "lines.solid_capstyle": "round", "patch.edgecolor": "w",
    "patch.force_edgecolor": True, "text.color": ".15", "xtick.bottom": False, "xtick.color": ".15",
    "xtick.labelsize": 11.0, "ytick.color": ".15", "ytick.labelsize": 11.0, "ytick.left": False,
}

#: longest slug, characters: a plot's file name stays well under the 255-byte limit of file systems
SLUG_MAX = 120
#: the collected table's column of a switched trial's blocks, and the column every timing=phase trial fills
_BLOCKS_COLUMN, _PHASE_COLUMN = "switch_blocks_json", f"phase_time_ms_{PHASES[0]}_mean"


def colors(n: int) -> list[str]:
    """``n`` colours of the palette, in order (it repeats past ten)."""
    return [PALETTE[i % len(PALETTE)] for i in range(n)]


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


def _measured(trials: pd.DataFrame, column: str) -> bool:
    """Whether some ok trial has a figure in ``column`` (a plot without data is not drawn)."""
    return column in trials.columns and bool(trials.loc[trials["status"] == TrialStatus.ok, column].notna().any())


def _mode_order(modes: Sequence[str], baseline: str) -> list[str]:
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
    """One violin of ``values`` at ``x`` (``side``: "both", "left" or "right" half), its quartiles dashed."""
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
    """Every timed step (ms) per repeat and mode, as violins (split for two modes) clipped at the 99.5th percentile."""
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
    ok = trials[trials["status"] == TrialStatus.ok].dropna(subset=["step_time_ms_median"])
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
    ok = trials[trials["status"] == TrialStatus.ok].copy()
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
    ok = trials[trials["status"] == TrialStatus.ok]
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


def phase_plot(trials: pd.DataFrame, baseline: str) -> Figure:
    """Mean ms per phase of each mode's ok trials, stacked (one bar per mode, baseline first)."""
    ok = trials[(trials["status"] == TrialStatus.ok) & trials[_PHASE_COLUMN].notna()]
    modes = _mode_order(ok["mode"].tolist(), baseline)
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
    several = len({c.condition_id for c in ranked}) > 1
    labels = [f"{c.mode}\n{c.condition_id}" if several else c.mode for c in ranked]
    steps = [c.metrics["step_overhead_ms"] for c in ranked]
    means = [0.0 if math.isnan(s.mean) else s.mean for s in steps]
    lows = [s.mean - s.ci_low if math.isfinite(s.ci_low) else 0.0 for s in steps]
    highs = [s.ci_high - s.mean if math.isfinite(s.ci_high) else 0.0 for s in steps]
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(7, max(2.5, 0.6 * len(labels) + 1.2)))
        ys = list(range(len(labels)))
        ax.barh(ys, means, color=colors(len(labels)), alpha=0.6)
        ax.errorbar(means, ys, xerr=[lows, highs], fmt="o", color="black", capsize=4)
        ax.axvline(0.0, color="grey", linewidth=1)
        ax.set_yticks(ys, labels)
        ax.invert_yaxis()
        base = ranked[0].baseline if ranked else "baseline"
        ax.set_xlabel(f"per-step overhead vs {base} (ms; bar: 95 % paired t interval)")
        ax.set_title("Tools compared: per-step cost", fontsize=10)
    return fig


def block_plot(trials: pd.DataFrame, baseline: str) -> Figure:
    """Block mean step (ms) against the block's first timed step, per mode, on-blocks filled, off-blocks open."""
    ok = trials[(trials["status"] == TrialStatus.ok) & trials[_BLOCKS_COLUMN].notna()]
    modes = _mode_order(ok["mode"].tolist(), baseline)
    fig, axes = plt.subplots(1, len(modes), figsize=(5.0 * len(modes), 3.6), squeeze=False, sharey=False)
    for ax, mode in zip(axes[0], modes):
        for _, row in ok[ok["mode"] == mode].sort_values("repeat").iterrows():
            blocks = json.loads(row[_BLOCKS_COLUMN]) or []
            x = [b["first_step"] for b in blocks]
            y = [b["mean_ms"] for b in blocks]
            line = ax.plot(x, y, color="0.75", linewidth=0.8, zorder=1)[0]
            for side, marker_face in (("on", None), ("off", "none")):
                xs = [b["first_step"] for b in blocks if b["side"] == side]
                ys = [b["mean_ms"] for b in blocks if b["side"] == side]
                ax.scatter(xs, ys, s=14, marker="o", facecolors=marker_face or line.get_color(),
                           edgecolors="C1" if side == "on" else "C0", zorder=2,
                           label=f"{side}" if row.name == ok[ok["mode"] == mode].index[0] else None)
        ax.set_title(f"{mode}: block mean step by side")
        ax.set_xlabel("first timed step of the block")
        ax.set_ylabel("mean step (slowest rank), ms")
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return fig


def plot_condition(trials: pd.DataFrame, comparisons: list[Comparison], out_dir: Path,
                   baseline: str) -> dict[str, Path]:
    """Write every plot of one condition (``trials``: its rows of the collected table) into ``out_dir``."""
    cond = comparisons[0].condition_id if comparisons else str(trials["condition_id"].iloc[0])
    stem = slug(cond)
    written: dict[str, Path] = {}
    for c in comparisons:
        if c.pairs:
            written[f"slope_{c.mode}"] = save_figure(slope_plot(c), out_dir / f"{stem}-slope-{slug(c.mode)}.png")
    if not trials[trials["status"] == TrialStatus.ok].empty:
        steps = load_step_times(trials)
        if not steps.empty or _measured(trials, "step_time_ms_median"):
            figure = step_distribution_plot(steps, baseline) if not steps.empty else step_time_plot(trials, baseline)
            written["step_time"] = save_figure(figure, out_dir / f"{stem}-step-time.png")
        for name, column, draw in (("wall_decomposition", "train_s", wall_decomposition_plot),
                                   ("throughput", "steps_per_s", throughput_plot),
                                   ("phases", _PHASE_COLUMN, phase_plot), ("blocks", _BLOCKS_COLUMN, block_plot)):
            if _measured(trials, column):
                file = out_dir / f"{stem}-{name.replace('_', '-')}.png"
                written[name] = save_figure(draw(trials, baseline), file)
    return written
