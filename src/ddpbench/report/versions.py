"""The report's "Versions compared" section and its plot (figures from :mod:`ddpbench.analysis.versions`)."""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ddpbench.analysis.results import Comparison  # noqa: E402
from ddpbench.analysis.stats import PairedSummary  # noqa: E402
from ddpbench.analysis.versions import METRICS, VersionStep  # noqa: E402
from ddpbench.formats.analysis_record import REGRESSION_WORDS  # noqa: E402

_LABELS = {"step_ms": "per-step Δ", "step_pct": "per-step Δ", "startup_s": "start-up Δ", "teardown_s": "teardown Δ",
           "memory_mb": "peak memory Δ"}


def interval(s: PairedSummary, digits: int = 3) -> str:
    """``+1.234 [+0.5, +2.0]`` (or ``(n=1)`` without an interval; ``n/a`` without pairs)."""
    if s.n == 0 or not math.isfinite(s.mean):
        return "n/a"
    if not (math.isfinite(s.ci_low) and math.isfinite(s.ci_high)):
        return f"{s.mean:+.{digits}f} (n={s.n})"
    return f"{s.mean:+.{digits}f} [{s.ci_low:+.{digits}f}, {s.ci_high:+.{digits}f}]"


def versions_section(steps: Sequence[VersionStep], comparisons: Sequence[Comparison], arms: Dict[str, List[str]],
                     regression_pct: float, plot_ref: Optional[str]) -> str:
    """Markdown: each version against the baseline, then each against the previous one in the list, with verdicts."""
    lines = ["", "## Versions compared", "",
             "Every version ran as an arm of its own in the same alternating-order repeat block as the baseline "
             "(docs/versions.md). Against the baseline (per-step overhead, ms, 95 % interval):", ""]
    listed = [arm for group in arms.values() for arm in group]
    for c in comparisons:
        if c.mode in listed:
            step = c.metrics.get("step_overhead_ms")
            lines.append(f"- {c.label}: {interval(step) if step is not None else 'n/a'} ms; verdict {c.verdict.status}")
    lines += ["", f"Each version against the previous one in the list, paired within the repeat; a regression is a "
              f"per-step Δ whose interval lies above +{regression_pct:g} %:", "",
              "| condition | previous → current | pairs | " + " | ".join(
                  f"{_LABELS[k]} ({u})" for k, u in METRICS.items()) + " | verdict |",
              "|---|---|---|" + "---|" * len(METRICS) + "---|"]
    for s in steps:
        names = f"{s.previous} ({s.previous_version or '?'}) → {s.current} ({s.current_version or '?'})"
        cells = " | ".join(interval(s.metrics[k], 2 if k != "step_ms" else 3) for k in METRICS)
        lines.append(f"| {s.condition_id} | {names} | {s.n_pairs} | {cells} | **{REGRESSION_WORDS[s.verdict]}** |")
    unknown = sorted({f"{p}: ddpbench's own figures are kept, the tool's summary figures are not read"
                      for s in steps for p in s.unknown_formats})
    lines += [""] + [f"- {line}" for line in unknown]
    if plot_ref:
        lines += ["", f"![per-step overhead by version]({plot_ref})"]
    return "\n".join(lines) + "\n"


def version_plot(comparisons: Sequence[Comparison], arms: Dict[str, List[str]]) -> Figure:
    """Per-step overhead against the baseline (ms, 95 % interval) of each version, in list order, per condition."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for cond in sorted({c.condition_id for c in comparisons}):
        for mode, listed in sorted(arms.items()):
            by_mode = {c.mode: c for c in comparisons if c.condition_id == cond}
            shown = [a for a in listed if a in by_mode]
            means = [by_mode[a].metrics["step_overhead_ms"].mean for a in shown]
            errs = [by_mode[a].metrics["step_overhead_ms"].half_width for a in shown]
            errs = [e if math.isfinite(e) else 0.0 for e in errs]
            ax.errorbar(range(len(shown)), means, yerr=errs, marker="o", capsize=4, label=f"{mode} [{cond}]")
            ax.set_xticks(range(len(shown)), shown, rotation=15)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_ylabel("per-step overhead vs baseline (ms)")
    ax.set_title("Overhead by version")
    ax.legend(fontsize=7)
    return fig
