"""``ddpbench-report SWEEP_DIR... [options]``: the report of sweeps, or with ``--history`` their history page.

Exit codes: 0 written; 1 over budget (``--fail-over-budget``) or a version regressed (``--fail-on-regression``);
3 none of those but one inconclusive; 2 bad input, with one ``ddpbench-report: error: ...`` line on stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from ddpbench.analysis.projection import JOB_HOURS
from ddpbench.errors import error_line
from ddpbench.formats.analysis_record import REGRESSION_WORDS
from ddpbench.report.build import EXIT_BAD_INPUT, ReportInputError, write_report

PROG = "ddpbench-report"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Write report.md, plots, results.csv and analysis.json for ddpbench sweeps.")
    parser.add_argument("sweep_dirs", nargs="+", type=Path, metavar="SWEEP_DIR")
    parser.add_argument("--out", type=Path, default=None, help="output dir (default: the first SWEEP_DIR)")
    parser.add_argument("--baseline", default="native", help="baseline mode (default: native)")
    parser.add_argument("--budget", type=float, default=2.0, help="overhead budget in percent (default: 2)")
    parser.add_argument("--job-hours", type=float, default=JOB_HOURS, metavar="H",
                        help=f"job length the verdict projects the fixed costs onto, hours of training (default: {JOB_HOURS:g})")
    parser.add_argument("--fail-over-budget", action="store_true",
                        help="exit 1 when a comparison is over budget, 3 when one is inconclusive")
    parser.add_argument("--regression-pct", type=float, default=1.0, metavar="PCT",
                        help="per-step increase over the previous version that is a regression, %% (default: 1)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 1 when a version regressed against the previous one, 3 when one is inconclusive")
    parser.add_argument("--history", action="store_true",
                        help="line the sweeps up by hardware, condition, tool version and date: history.md and index.html")
    return parser


def _history(args: argparse.Namespace) -> int:
    import datetime as dt

    from ddpbench import __version__
    from ddpbench.analysis.history import history
    from ddpbench.collect.collector import collect_trials
    from ddpbench.report.history import write_history

    missing = [d for d in args.sweep_dirs if not d.exists()]
    if missing:
        return error_line(f"no such sweep dir: {missing[0]}", EXIT_BAD_INPUT, PROG)
    if not args.job_hours > 0:
        return error_line(f"--job-hours {args.job_hours}: must be > 0 (hours of training)", EXIT_BAD_INPUT, PROG)
    frame = collect_trials(list(args.sweep_dirs)).frame
    if frame.empty:
        return error_line(f"no usable trial.json under {', '.join(map(str, args.sweep_dirs))}", EXIT_BAD_INPUT, PROG)
    found = history(frame, baseline=args.baseline, job_hours=args.job_hours)
    out = Path(args.out if args.out is not None else args.sweep_dirs[0])
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    try:
        files = write_history(found, out, generated, __version__, [str(d) for d in args.sweep_dirs])
    except OSError as exc:
        return error_line(f"cannot write the history into {out}: {exc.strerror or exc}", EXIT_BAD_INPUT, PROG)
    print(f"{PROG}: wrote {files.markdown} and {files.page} ({len(found.points)} points, "
          f"{len(found.changes)} step(s))")
    for c in found.changes:
        print(f"  {c.kind}: {c.series[3]} {c.before.version} -> {c.after.version} ({c.after.date}) [{c.series[2]}]: "
              f"{c.step.delta:+.3f} ms [{c.step.ci_low:+.3f}, {c.step.ci_high:+.3f}]")
    return 0


def regression_exit_from_record(analysis_path: Path) -> int:
    """``--fail-on-regression`` from the versions comparison recorded in analysis.json (2 when it cannot be read)."""
    from ddpbench.analysis.versions import verdicts_exit_code
    from ddpbench.formats.analysis_record import read_analysis_record, version_verdicts

    record, problem = read_analysis_record(analysis_path)
    verdicts = version_verdicts(record) if record is not None else None
    if verdicts is None:
        return error_line(f"{analysis_path}: {problem or 'no versions comparison recorded'}", EXIT_BAD_INPUT, PROG)
    return verdicts_exit_code(verdicts)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.regression_pct <= 0:
        return error_line(f"--regression-pct {args.regression_pct}: must be > 0", EXIT_BAD_INPUT, PROG)
    if args.history:
        return _history(args)
    try:
        outcome = write_report(args.sweep_dirs, args.out, baseline=args.baseline, budget_pct=args.budget,
                               job_hours=args.job_hours, regression_pct=args.regression_pct)
    except ReportInputError as exc:
        return error_line(f"{exc}", EXIT_BAD_INPUT, PROG)
    except OSError as exc:
        return error_line(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), EXIT_BAD_INPUT, PROG)
    print(f"{PROG}: wrote {outcome.report_path} ({outcome.n_trials} trials, {outcome.n_pairs} pairs, "
          f"{outcome.n_excluded} excluded, {outcome.n_skipped} skipped)")
    for label, status in outcome.verdicts.items():
        print(f"  {label}: {status}")
    for step in outcome.version_steps:
        print(f"  {step.current} vs {step.previous} [{step.condition_id}]: {REGRESSION_WORDS[step.verdict]}")
    code = outcome.exit_code(args.fail_over_budget)
    regression = regression_exit_from_record(outcome.analysis_path) if args.fail_on_regression else 0
    return max(code, regression, key=lambda c: {0: 0, 3: 1, 1: 2}.get(c, 3))
