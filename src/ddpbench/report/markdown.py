"""The report.md text: a pure layout of the analysis, its provenance and caveats, and the plot paths (every
figure comes from :mod:`ddpbench.analysis`; the tables and sections are laid out by :mod:`.tables`, :mod:`.sections`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from ddpbench.analysis.caveats import caveats, fmt
from ddpbench.analysis.coverage import tool_step_coverage
from ddpbench.analysis.efficiency import workload_of
from ddpbench.analysis.paired import Analysis, Comparison
from ddpbench.analysis.provenance import provenance
from ddpbench.analysis.results import FigureGroup
from ddpbench.analysis.tools import compares_several_tools
from ddpbench.choices import Role
from ddpbench.report.sections import (artifacts, calibration_line, details, disturbed, efficiency_line, method, setup,
                                      stopping_section, switching_lines, verdict_line)
from ddpbench.report.tables import ci, figure_rows_table, headline, tool_table

GPU_NOTE = ("Per step on the GPU's own clock (CUDA events at each step's device boundaries, no synchronisation in "
            "the loop): *GPU busy* runs from the step's first device work to its last (gaps between its own kernels "
            "included), *GPU idle* is the time between two steps with none of the loop's work queued. A tool whose "
            "cost is host time the GPU waits for (lost overlap) raises the host step and GPU idle alike; one that "
            "adds GPU work raises GPU busy.")
STARTUP_NOTE = ("The start-up of the rank that began timing last, in parts that add up to the start-up figure: "
                "before the rank is the launcher's (and a tool's launcher's) time until the rank's first statement.")
PHASE_NOTE = ("Phase timing (`timing=phase`) synchronizes the device after every phase, which on CUDA changes "
              "what it measures (kernels no longer overlap the host): read it for *where* a tool's cost lands, "
              "and quote the `timing=step` figures for *how much*.")


@dataclass(frozen=True)
class FigureTable:
    """How the report shows one group of figure rows: the title above the table, the head of its name column and
    the note under it ("" for none)."""

    group: FigureGroup
    title: str
    what: str
    note: str = ""


#: the figure-row tables of a condition, in order
FIGURE_TABLES = (FigureTable(FigureGroup.phase, "Per-phase time, mean ms per step:", "phase", PHASE_NOTE),
                 FigureTable(FigureGroup.gpu, "Where the step's time lands, mean ms per step:", "per step", GPU_NOTE),
                 FigureTable(FigureGroup.startup, "Start-up by part, s per trial:", "part", STARTUP_NOTE),
                 FigureTable(FigureGroup.memory, "Peak memory (the largest rank's), MB:", "peak"),
                 FigureTable(FigureGroup.metric, "Figures read from the workload's output:", "figure"))


def _condition_block(cc: list[Comparison], plots: Mapping[str, str], job_hours: float) -> list[str]:
    lines: list[str] = []
    if cc:
        lines += headline(cc, job_hours)
        lines += efficiency_line(cc)
        for shown in FIGURE_TABLES:
            table = figure_rows_table(cc, shown.group, shown.what)
            if table:
                lines += [shown.title, "", *table, *([shown.note, ""] if shown.note else [])]
    for name, rel in plots.items():
        lines += [f"![{name}]({rel})", ""]
    return lines


def _results(analysis: Analysis, frame: pd.DataFrame, plots: Mapping[str, Mapping[str, str]]) -> list[str]:
    comps = list(analysis.comparisons)
    conditions = list(OrderedDict.fromkeys([c.condition_id for c in comps] + list(plots)))
    workload = {c.condition_id: c.workload for c in comps}
    for row in frame.to_dict("records"):
        workload.setdefault(str(row.get("condition_id")), workload_of(row))
    workloads = list(OrderedDict.fromkeys(workload.get(c, "mlp") for c in conditions))
    lines = ["## Results", ""]
    several = len(workloads) > 1
    if not several and workloads:
        lines += [f"Workload: `{workloads[0]}`.", ""]
    for w in workloads:
        if several:
            lines += [f"### Workload `{w}`", ""]
        for cond in (c for c in conditions if workload.get(c, "mlp") == w):
            lines += [f"{'####' if several else '###'} Condition `{cond}`", ""]
            lines += _condition_block([c for c in comps if c.condition_id == cond], plots.get(cond, {}),
                                      analysis.job_hours)
    if not comps:
        lines += [f"No pairs could be formed (no mode other than `{analysis.baseline}` with an ok baseline).", ""]
    return lines


def ranked_tools(analysis: Analysis) -> list[Comparison]:
    """The tool comparisons, smallest per-step overhead first."""
    by_label = {c.label: c for c in analysis.comparisons if c.role == Role.tool}
    return [by_label[label] for label in analysis.tool_ranking if label in by_label]


def render_report(
    analysis: Analysis,
    frame: pd.DataFrame,
    plots: Mapping[str, Mapping[str, str]],
    sweep_dirs: Sequence[str],
    skipped: Sequence[tuple[str, str]] = (),
    generated_at: str = "",
    ddpbench_version: str = "",
    tool_plot: str | None = None,
    stopping: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The whole report.md. ``plots``: condition_id → {plot name → path relative to the report}; ``tool_plot``:
    that of the plot comparing the tools; ``stopping``: the ``stopping.json`` records of ``repeat=auto`` sweeps."""
    comps = list(analysis.comparisons)
    tools = [c for c in comps if c.role == Role.tool]
    title = ", ".join(sorted({c.mode for c in tools})) or "ddpbench"
    lines = [
        f"# Overhead report: {title} vs {analysis.baseline}",
        "",
        f"Generated {generated_at} by ddpbench {ddpbench_version} from {len(sweep_dirs)} sweep dir(s): "
        + ", ".join(f"`{d}`" for d in sweep_dirs)
        + f". {analysis.n_trials} trials ({analysis.n_ok} ok), {sum(c.n_pairs for c in comps)} pairs used, "
        f"{sum(c.n_excluded for c in comps)} excluded, {len(skipped)} file(s) skipped.",
        "",
    ]
    for record in stopping:
        lines += stopping_section(record)
    if compares_several_tools(comps):
        lines += ["## Tools compared", "",
                  f"Every tool against `{analysis.baseline}`, smallest per-step overhead first (95 % paired t "
                  f"intervals; verdict against the {analysis.budget_pct:g} % budget):", ""]
        lines += tool_table(ranked_tools(analysis), analysis.job_hours)
        if tool_plot:
            lines += [f"![tools]({tool_plot})", ""]
    if tools:
        lines += [f"**Verdicts** (budget {analysis.budget_pct:g} % of a {analysis.job_hours:g} h job: the per-step "
                  "cost all along plus the fixed cost once; `report.job_hours`, `--job-hours`):", ""]
        lines += [verdict_line(c, analysis.job_hours) for c in tools]
        lines.append("")
    lines += switching_lines(comps)
    for c in comps:
        if c.role == Role.calibration:
            lines += [calibration_line(c), ""]
    for c in comps:
        if c.role == Role.aa:
            lines += [
                f"Noise floor ({c.label}): throughput-overhead interval {ci(c.metrics['throughput_overhead_pct'], ' %')}, "
                f"half-width ±{fmt(c.metrics['throughput_overhead_pct'].half_width)} %; per-step "
                f"{ci(c.metrics.get('step_overhead_ms'), ' ms', 3)}.",
                "",
            ]
    lines += setup(provenance(frame, analysis.baseline))
    lines += method(analysis)
    lines += _results(analysis, frame, plots)
    lines += ["## Details", ""]
    for c in comps:
        lines += details(c)
    notes = caveats(analysis, tool_step_coverage(frame))
    lines += ["## Caveats", ""] + ([f"- {line}" for line in notes] or ["- None."]) + [""]
    lines += disturbed(analysis)
    lines += artifacts(analysis)
    lines += ["## Failed trials", ""]
    failed = []
    for f in analysis.failed_trials:
        error = (f.error or "").replace("|", "\\|")
        exit_code = "—" if f.exit_code is None else f.exit_code
        failed.append(f"| {f.condition_id} | {f.mode} | {f.repeat} | {f.status} | {exit_code} | {error} "
                      f"| `{f.source_path}` |")
    lines += (["| condition | mode | repeat | status | exit code | error | file |", "|---|---|---|---|---|---|---|",
               *failed] if failed else ["None."])
    lines += ["", "## Skipped files", "", *([f"- `{p}`: {reason}" for p, reason in skipped] or ["None."]), ""]
    return "\n".join(lines)
