"""Report writing: :func:`write_report` (report.md, plots, results.csv, analysis.json), ``ddpbench-report``."""

from ddpbench.report.build import ReportInputError, ReportOutcome, write_report

__all__ = ["ReportInputError", "ReportOutcome", "write_report"]
