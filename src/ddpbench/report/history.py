"""``ddpbench-report --history``: ``history.md``, ``plots/history.png`` and ``index.html``, written atomically.

The page is self-contained: inline PNGs and style, no script, a CSP that forbids every fetch but ``data:``
images. Every string from a record goes through :func:`esc`.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Tuple

from ddpbench.analysis.changepoint import MIN_POINTS_FOR_SPREAD, ChangePoints
from ddpbench.analysis.history import History, HistoryChange, HistoryPoint, Series
from ddpbench.analysis.stats import PairedSummary
from ddpbench.io import write_text_atomic
from ddpbench.report.history_plots import history_plot, png_base64, series_plot
from ddpbench.report.plots import save_figure
from ddpbench.report.versions import interval

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1280px;
color:#222;padding:0 1em;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd}
h3{font-size:1.05em;margin-top:1.2em}.meta,.note{color:#555;font-size:.9em}
table{border-collapse:collapse;font-size:.85em;margin:.6em 0;width:100%}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.step td{background:#fdecea}.up{color:#b3261e;font-weight:600}.down{color:#1e6b33;font-weight:600}
img{max-width:100%;height:auto;border:1px solid #eee}code{font-size:.9em;overflow-wrap:anywhere}
.wide{overflow-x:auto}.long{display:inline-block;max-width:18em;overflow-wrap:anywhere}.badge{display:inline-block;padding:0 .5em;border-radius:.6em;background:#b3261e;color:#fff;font-size:.8em}
"""


def esc(value: object) -> str:
    """Text from a record, as HTML text or attribute value."""
    return html.escape(str(value), quote=True)


def _hardware(series: Series) -> str:
    return " + ".join(x for x in series[:2] if x) or "unknown hardware"


def _title(series: Series) -> str:
    return f"{series[3]} on {_hardware(series)} [{series[2]}]"


def _long(value: object) -> str:
    """A record's string that may be long (an arm named by a commit, a path), wrapped within its column."""
    return f"<span class=long>{esc(value)}</span>"


def _cell(s: PairedSummary, digits: int = 3) -> str:
    return f'<td class="num">{esc(interval(s, digits))}</td>'


def _changes_table(changes: Sequence[HistoryChange], anchors: Dict[Series, str]) -> List[str]:
    rows = ["<div class=wide><table><thead><tr><th>tool</th><th>hardware</th><th>condition</th><th>from</th><th>to</th>"
            "<th>per-step Δ (ms, 95 %)</th><th>level before → after (ms)</th><th>p</th></tr></thead><tbody>"]
    for c in changes:
        s, arrow = c.step, "up" if c.kind == "regression" else "down"
        rows.append(
            f'<tr><td><a href="#{anchors[c.series]}">{esc(c.series[3])}</a></td><td>{esc(_hardware(c.series))}</td>'
            f"<td>{esc(c.series[2])}</td><td>{esc(c.before.version)} ({esc(c.before.date)})</td>"
            f"<td>{esc(c.after.version)} ({esc(c.after.date)})</td>"
            f'<td class="num {arrow}">{s.delta:+.3f} [{s.ci_low:+.3f}, {s.ci_high:+.3f}]</td>'
            f'<td class="num">{s.before:+.3f} → {s.after:+.3f}</td><td class="num">{_p(s.p_value)}</td></tr>')
    return rows + ["</tbody></table></div>"]


def _p(p_value: float) -> str:
    return "&lt; 0.001" if p_value < 0.001 else f"{p_value:.3f}"


def _spread_note(fit: ChangePoints | None, n_points: int) -> str:
    if fit is None or len(fit.tested) < 2:
        return "Fewer than two points with an interval: no step can be tested."
    untested = n_points - len(fit.tested)
    skipped = f" {untested} point(s) without an interval (fewer than two pairs) are shown, not tested." if untested else ""
    if fit.spread_estimated:
        return (f"Spread between sweeps beyond their own intervals: τ = {fit.spread:.3f} ms (estimated from "
                f"{len(fit.tested)} points), added to every point's variance.{skipped}")
    return (f"Fewer than {MIN_POINTS_FOR_SPREAD} points: the spread between sweeps is not estimated, so a step here "
            f"is judged against the points' own intervals only; a step between sweeps of different days may be the "
            f"day, not the version (compare versions side by side in one sweep: versions=).{skipped}")


def _where(points: Sequence[HistoryPoint]) -> Tuple[str, Dict[str, str]]:
    """The sweep dirs' common folder, and each sweep dir relative to it (its full path when alone)."""
    dirs = sorted({p.sweep_dir for p in points})
    try:
        common = os.path.commonpath(dirs) if len(dirs) > 1 else ""
    except ValueError:  # absolute and relative paths mixed
        common = ""
    if len(Path(common).parts) < 3:  # "/" or "/tmp": no common folder worth naming
        common = ""
    return common, {d: os.path.relpath(d, common) if common else d for d in dirs}


def _points_table(points: Sequence[HistoryPoint], job_hours: float) -> List[str]:
    common, short = _where(points)
    rows = ["<div class=wide><table><thead><tr><th>version</th><th>date</th><th>arm</th><th>spec</th>"
            f"<th>per-step (ms)</th><th>per-step (%)</th><th>projected, {job_hours:g} h job (%)</th><th>pairs</th>"
            "<th>sweep</th></tr></thead><tbody>"]
    for p in points:
        mark = ' <span class="badge">step</span>' if p.step_change else ""
        rows.append(f'<tr{" class=step" if p.step_change else ""}><td>{esc(p.version)}{mark}</td><td>{esc(p.date)}</td>'
                    f"<td>{_long(p.arm)}</td><td>{_long(p.spec)}</td>{_cell(p.step_ms)}{_cell(p.step_pct, 2)}"
                    f'{_cell(p.projected_pct, 2)}<td class="num">{p.step_ms.n}</td><td><code class=long>{esc(short[p.sweep_dir])}</code>'
                    "</td></tr>")
    under = f"<p class=note>Sweeps under <code>{esc(common)}</code>.</p>" if common else ""
    return rows + ["</tbody></table></div>", under]


def _modes(points: Iterable[HistoryPoint]) -> List[str]:
    seen = dict.fromkeys((p.arm, p.description, p.command) for p in points)
    rows = ["<details><summary>Modes as recorded</summary><table><thead><tr><th>arm</th><th>description</th>"
            "<th>command</th></tr></thead><tbody>"]
    rows += [f"<tr><td>{_long(arm)}</td><td>{esc(description)}</td><td><code>{esc(command)}</code></td></tr>"
             for arm, description, command in seen]
    return rows + ["</tbody></table></details>"]


def render_history_page(history: History, generated: str, ddpbench_version: str, sweep_dirs: Sequence[str]) -> str:
    """The whole page, as text."""
    every = history.series()
    anchors = {s: f"series-{i + 1}" for i, s in enumerate(every)}
    regressions = [c for c in history.changes if c.kind == "regression"]
    improvements = [c for c in history.changes if c.kind != "regression"]
    body = [f"<h1>Overhead history</h1><p class=meta>{len(history.points)} point(s) in {len(every)} series from "
            f"{len(sweep_dirs)} sweep dir(s); generated {esc(generated)} by ddpbench {esc(ddpbench_version)}.</p>",
            "<p>Each point is one tool version in one sweep: its overhead against the baseline of the same sweep, "
            "with the 95 % paired interval. Points of the same hardware, condition and tool form a series, ordered "
            "by version and then date. A step is a change of level found by the method below.</p>",
            f'<h2 id="regressions">Regressions ({len(regressions)})</h2>']
    body += _changes_table(regressions, anchors) if regressions else ["<p>No step up in any series.</p>"]
    if improvements:
        body += [f"<h2>Improvements ({len(improvements)})</h2>", *_changes_table(improvements, anchors)]
    if not every:
        body.append("<p>No tool arm was paired with a baseline trial in these sweeps: nothing to show.</p>")
    nav = "".join(f'<li><a href="#{anchors[s]}">{esc(_title(s))}</a></li>' for s in every)
    body += [f"<h2>Series</h2><ul>{nav}</ul>"]
    for series in every:
        points, fit = history.of(series), history.fits.get(series)
        image = png_base64(series_plot(points, fit))
        body += [f'<section id="{anchors[series]}"><h3>{esc(_title(series))}</h3>',
                 f'<p class=note>{esc(_spread_note(fit, len(points)))}</p>',
                 f'<img alt="overhead of {esc(series[3])} by version" src="data:image/png;base64,{image}">',
                 *_points_table(points, history.job_hours), *_modes(points), "</section>"]
    body += ['<h2 id="method">Method</h2>',
             f"<p>Steps are found on the per-step overhead (ms) of each series, at a false-alarm rate of "
             f"{100 * history.alpha:g} % per series: {esc(history.method)}. A step up is a regression, a step down "
             "an improvement. The projected overhead is the per-step cost over a job of "
             f"{history.job_hours:g} h of training plus the fixed start-up and teardown costs once (docs/versions.md).</p>",
             "<p class=note>Sweep dirs: " + ", ".join(f"<code>{esc(d)}</code>" for d in sweep_dirs) + "</p>"]
    return ("<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            f"<title>ddpbench overhead history</title><style>{_STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


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
