"""Build a report from sweep dirs: collect, analyse, plot, and write (atomically) ``report.md``, ``plots/*.png``,
``results.csv`` (+ ``results.parquet`` when pyarrow imports) and ``analysis.json``.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from ddpbench import __version__
from ddpbench.analysis.paired import Analysis, analysis_to_dict, analyze
from ddpbench.analysis.projection import JOB_HOURS, job_seconds
from ddpbench.analysis.rerun import RerunKey, rerun_pairs
from ddpbench.collect.collector import collect_trials, write_results
from ddpbench.formats.analysis_record import ANALYSIS_FILE
from ddpbench.io import write_json_atomic, write_text_atomic
from ddpbench.formats.stopping_record import read_stopping_record
from ddpbench.report.markdown import ranked_tools, render_report
from ddpbench.analysis.tools import compares_several_tools
from ddpbench.choices import Role, Verdict
from ddpbench.report.plots import plot_condition, save_figure, tool_plot
from ddpbench.analysis.versions import VersionStep, compare_versions, unknown_formats, version_lists, versions_to_dict
from ddpbench.report.versions import version_plot, versions_section

EXIT_OK, EXIT_OVER, EXIT_BAD_INPUT, EXIT_INCONCLUSIVE = 0, 1, 2, 3


class ReportInputError(ValueError):
    """The sweep dirs or the output dir cannot be used (the CLI exits 2 with this message)."""


@dataclass(frozen=True)
class ReportOutcome:
    """What :func:`write_report` wrote and found; ``verdicts``: each tool comparison's label -> its verdict."""

    report_path: Path
    analysis_path: Path
    results_paths: tuple[Path, ...]
    plot_paths: tuple[Path, ...]
    verdicts: dict[str, Verdict]
    n_trials: int
    n_ok: int
    n_skipped: int
    n_pairs: int
    n_excluded: int
    analysis: Analysis
    # each version against the previous one in the sweep's versions= list (empty without versions=)
    version_steps: tuple[VersionStep, ...] = ()

    def exit_code(self, fail_over_budget: bool = False) -> int:
        """0; with ``fail_over_budget``: 1 when any comparison is over budget, else 3 when any is inconclusive."""
        found = set(self.verdicts.values()) if fail_over_budget else set()
        return EXIT_OVER if Verdict.over in found else EXIT_INCONCLUSIVE if Verdict.inconclusive in found else EXIT_OK


def _check_inputs(sweep_dirs: Sequence[Path]) -> None:
    if not sweep_dirs:
        raise ReportInputError("no sweep dir given")
    for d in sweep_dirs:
        if not d.exists():
            raise ReportInputError(f"no such sweep dir: {d}")
        if d.is_dir() and not any(d.iterdir()):
            raise ReportInputError(f"empty sweep dir: {d}")


def _check_out_dir(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportInputError(f"cannot create output dir {out_dir}: {exc.strerror or exc}") from None
    if not out_dir.is_dir() or not os.access(out_dir, os.W_OK | os.X_OK):
        raise ReportInputError(f"output dir is not writable: {out_dir}")


def _rerun(frame: pd.DataFrame, stopping: Mapping[Path, Mapping[str, Any]]) -> dict[RerunKey, str]:
    """The pairs each sweep dir's ``stopping.json`` re-ran, keyed by the ``sweep_dir`` its trials recorded."""
    out: dict[RerunKey, str] = {}
    for d, record in stopping.items():
        inside = os.path.join(os.path.abspath(d), "")
        recorded = {str(s) for p, s in zip(frame["source_path"], frame["sweep_dir"]) if str(p).startswith(inside)}
        out.update(rerun_pairs(record, recorded))
    return out


def write_report(
    sweep_dirs: list[Path],
    out_dir: Path | None = None,
    baseline: str = "native",
    budget_pct: float = 2.0,
    job_hours: float = JOB_HOURS,
    regression_pct: float = 1.0,
) -> ReportOutcome:
    """Collect every trial.json under ``sweep_dirs``, analyse the pairs and write the report into ``out_dir``
    (default: the first sweep dir). ``job_hours``: the job the verdict projects onto (hours of training);
    ``regression_pct``: the per-step threshold between consecutive versions. :class:`ReportInputError` for bad input.
    """
    try:
        job_seconds(job_hours)
    except ValueError:
        raise ReportInputError(f"job hours {job_hours!r}: must be a number > 0 (hours of training)") from None
    dirs = [Path(d) for d in sweep_dirs]
    _check_inputs(dirs)
    collected = collect_trials(dirs)
    frame = collected.frame
    if frame.empty:
        where = ", ".join(str(d) for d in dirs)
        if collected.files_seen == 0:
            raise ReportInputError(f"no trial.json found under {where}")
        first = collected.skipped[0]
        raise ReportInputError(
            f"no usable trial.json under {where} ({len(collected.skipped)} skipped, e.g. {first[0]}: {first[1]})"
        )
    out = Path(out_dir) if out_dir is not None else (dirs[0] if dirs[0].is_dir() else dirs[0].parent)
    _check_out_dir(out)

    stopping = {d: record for d in dirs for record in [read_stopping_record(d)[0]] if record is not None}
    analysis = analyze(frame, baseline=baseline, budget_pct=budget_pct, rerun=_rerun(frame, stopping),
                       job_hours=job_hours)
    plots_dir = out / "plots"
    plot_paths: list[Path] = []
    plot_refs: dict[str, dict[str, str]] = {}
    for cond, trials in frame.groupby("condition_id", sort=True):
        comps = [c for c in analysis.comparisons if c.condition_id == cond]
        written = plot_condition(trials, comps, plots_dir, baseline)
        plot_paths += written.values()
        plot_refs[str(cond)] = {name: os.path.relpath(p, out) for name, p in written.items()}

    tool_plot_ref = None
    if compares_several_tools(analysis.comparisons):
        path = save_figure(tool_plot(ranked_tools(analysis)), plots_dir / "tools-step-overhead.png")
        plot_paths.append(path)
        tool_plot_ref = os.path.relpath(path, out)

    results = write_results(frame, out)
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    arms = version_lists(frame)
    steps = compare_versions(frame, regression_pct) if arms else []
    payload = analysis_to_dict(analysis)
    payload.update(
        versions=versions_to_dict(steps, regression_pct),
        sweep_dirs=[str(d) for d in dirs],
        skipped=[{"path": p, "reason": r} for p, r in collected.skipped],
        generated_at=generated,
        ddpbench_version=__version__,
    )
    analysis_path = write_json_atomic(out / ANALYSIS_FILE, payload)
    text = render_report(
        analysis, frame, plot_refs, [str(d) for d in dirs], collected.skipped, generated, __version__, tool_plot_ref,
        list(stopping.values()),
    )
    if arms:
        listed = [c for c in analysis.comparisons if any(c.mode in group for group in arms.values())]
        plot = save_figure(version_plot(listed, arms), plots_dir / "versions-step-overhead.png") if listed else None
        plot_paths += [plot] if plot is not None else []
        text += versions_section(steps, listed, arms, regression_pct, os.path.relpath(plot, out) if plot else None)
    elif unknown_formats(frame):
        text += "\n## Tool output\n\n" + "".join(f"- {line}\n" for line in unknown_formats(frame))
    report_path = write_text_atomic(out / "report.md", text)
    return ReportOutcome(
        report_path=report_path,
        analysis_path=analysis_path,
        results_paths=tuple(results),
        plot_paths=tuple(plot_paths),
        verdicts={c.label: c.verdict.status for c in analysis.comparisons if c.role == Role.tool},
        n_trials=analysis.n_trials,
        n_ok=analysis.n_ok,
        n_skipped=len(collected.skipped),
        n_pairs=sum(c.n_pairs for c in analysis.comparisons),
        n_excluded=sum(c.n_excluded for c in analysis.comparisons),
        analysis=analysis,
        version_steps=tuple(steps),
    )
