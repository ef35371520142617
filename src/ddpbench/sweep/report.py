"""The report written when a sweep ends, normally (the Hydra callback) or stopped by a signal (the driver)."""

from __future__ import annotations

import sys
from pathlib import Path

from ddpbench.config import DdpbenchConfig
from ddpbench.formats.trial_record import TRIAL_FILE


def write_sweep_report(sweep_dir: Path, cfg: DdpbenchConfig) -> None:
    """Write report.md, plots and results.csv into ``sweep_dir`` with the sweep's settings, if this driver writes
    the report and any trial.json exists; a failure is one line on stderr and makes the sweep exit non-zero."""
    from ddpbench import state
    from ddpbench.cluster import backend_for

    if not backend_for(cfg).writes_report(cfg):
        print(f"ddpbench: node {cfg.cluster.node_rank} done; node 0 writes the report", flush=True)
        return
    if not any(sweep_dir.glob(f"*/{TRIAL_FILE}")):
        return
    try:
        from ddpbench.report.build import write_report

        write_report([sweep_dir], sweep_dir, baseline=cfg.baseline, budget_pct=cfg.budget_pct,
                     job_hours=cfg.report.job_hours, regression_pct=cfg.regression_pct)
    except Exception as error:
        print(f"ddpbench: could not write the report: {type(error).__name__}: {error}", file=sys.stderr,
              flush=True)
        state.record_failure()  # no report (a full or read-only disk, say): the sweep exits non-zero
        return
    print(f"ddpbench: report: {sweep_dir / 'report.md'}", flush=True)
