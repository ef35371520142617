"""The within-trial switching plot: each block's mean step (the slowest rank's, ms) over the trial, by side.

One panel per mode that switched; each trial is one line through its blocks in order, the on-blocks and
off-blocks marked apart, so a drift, a carry-over (an off-block slow after an on-block) or a trial unlike the
others shows. Figures only; files are written by :func:`ddpbench.report.plots.save_figure`.
"""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

__all__ = ["has_blocks", "block_plot"]

_COLUMN = "switch_blocks_json"


def has_blocks(trials: pd.DataFrame) -> bool:
    """True when some ok trial of ``trials`` switched (has blocks)."""
    return _COLUMN in trials.columns and bool(trials.loc[trials["status"] == "ok", _COLUMN].notna().any())


def block_plot(trials: pd.DataFrame, baseline: str) -> Figure:
    """Block mean step (ms) against the block's first timed step, per mode, on-blocks filled, off-blocks open."""
    ok = trials[(trials["status"] == "ok") & trials[_COLUMN].notna()]
    modes = sorted(set(ok["mode"]), key=lambda m: (m != baseline, m))
    fig, axes = plt.subplots(1, len(modes), figsize=(5.0 * len(modes), 3.6), squeeze=False, sharey=False)
    for ax, mode in zip(axes[0], modes):
        for _, row in ok[ok["mode"] == mode].sort_values("repeat").iterrows():
            blocks = json.loads(row[_COLUMN]) or []
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
