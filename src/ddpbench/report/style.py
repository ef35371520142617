"""The plots' look: seaborn's ``whitegrid`` style, ``notebook`` context and ``deep`` palette as plain matplotlib
settings, without importing seaborn (and through it scipy.stats: about a second of every report's start-up).
"""

from __future__ import annotations

from typing import Any, Dict, List

#: seaborn's "deep" palette, in its order
PALETTE: List[str] = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3",
                      "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"]

#: matplotlib rc settings of seaborn's whitegrid style in its notebook context (sizes in points); the plots
#: pass their colours from :func:`colors`
RC: Dict[Any, Any] = {
    "axes.axisbelow": True, "axes.edgecolor": ".8", "axes.grid": True, "axes.labelcolor": ".15",
    "axes.labelsize": 12.0, "axes.linewidth": 1.25, "axes.titlesize": 12.0,
    "font.size": 12.0, "grid.color": ".8", "grid.linewidth": 1.0, "legend.fontsize": 11.0,
    "legend.title_fontsize": 12.0, "lines.solid_capstyle": "round", "patch.edgecolor": "w",
    "patch.force_edgecolor": True, "text.color": ".15", "xtick.bottom": False, "xtick.color": ".15",
    "xtick.labelsize": 11.0, "ytick.color": ".15", "ytick.labelsize": 11.0, "ytick.left": False,
}


def colors(n: int) -> List[str]:
    """``n`` colours of the palette, in order (it repeats past ten)."""
    return [PALETTE[i % len(PALETTE)] for i in range(n)]
