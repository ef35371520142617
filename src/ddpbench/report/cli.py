"""``ddpbench-report SWEEP_DIR... [--out DIR] [--baseline native] [--budget 2] [--job-hours 1] [--fail-over-budget]``.

The verdict is on the per-step cost and on the cost projected onto a job of ``--job-hours`` hours of
training (fixed start-up and teardown paid once). Exit codes: 0 report written; 1 a comparison is
over budget (only with ``--fail-over-budget``);
3 none over but one inconclusive (only with ``--fail-over-budget``); 2 bad input — nonexistent
or empty sweep dir, no usable trial.json, unwritable output dir — with a one-line
``ddpbench-report: error: ...`` on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ddpbench.analysis.projection import JOB_HOURS
from ddpbench.report.build import EXIT_BAD_INPUT, ReportInputError, write_report

PROG = "ddpbench-report"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Write report.md, plots, results.csv and analysis.json for ddpbench sweeps.")
    parser.add_argument("sweep_dirs", nargs="+", type=Path, metavar="SWEEP_DIR")
    parser.add_argument("--out", type=Path, default=None, help="output dir (default: the first SWEEP_DIR)")
    parser.add_argument("--baseline", default="native", help="baseline mode (default: native)")
    parser.add_argument("--budget", type=float, default=2.0, help="overhead budget in percent (default: 2)")
    parser.add_argument("--job-hours", type=float, default=JOB_HOURS, metavar="H",
                        help=f"job length the verdict projects the fixed costs onto, hours of training (default: {JOB_HOURS:g})")
    parser.add_argument(
        "--fail-over-budget", action="store_true",
        help="exit 1 when a comparison is over budget, 3 when one is inconclusive",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        outcome = write_report(args.sweep_dirs, args.out, baseline=args.baseline, budget_pct=args.budget,
                               job_hours=args.job_hours)
    except ReportInputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"{PROG}: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"{PROG}: wrote {outcome.report_path} ({outcome.n_trials} trials, {outcome.n_pairs} pairs, "
          f"{outcome.n_excluded} excluded, {outcome.n_skipped} skipped)")
    for label, status in outcome.verdicts.items():
        print(f"  {label}: {status}")
    return outcome.exit_code(args.fail_over_budget)


if __name__ == "__main__":
    sys.exit(main())
