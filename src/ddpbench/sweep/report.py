"""The report written when a sweep ends, normally (the Hydra callback) or stopped by a signal (the driver)."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig

from ddpbench.formats.trial_record import TRIAL_FILE


def write_sweep_report(config: DictConfig) -> None:
    """Write report.md, plots and results.csv into the sweep dir of ``config``, with its baseline, budget and job length.

    A static-cluster node other than 0 leaves the report to node 0; a sweep without any trial.json writes
    none. A failure is one line on stderr and makes the sweep exit non-zero; it never hides the trials' own outcome.
    """
    from ddpbench import state
    from ddpbench.cluster import writes_report
    from ddpbench.config import typed
    from ddpbench.sweep.validate import task_config

    sweep_dir = Path(str(config.hydra.sweep.dir))
    if config.get("cluster") is not None and not writes_report(typed(task_config(config))):
        print(f"ddpbench: node {config.cluster.node_rank} done; node 0 writes the report", flush=True)
        return
    if not any(sweep_dir.glob(f"*/{TRIAL_FILE}")):
        return
    try:
        from ddpbench.report.build import write_report

        write_report([sweep_dir], sweep_dir, baseline=str(config.baseline), budget_pct=float(config.budget_pct),
                     job_hours=float(config.report.job_hours),
                     regression_pct=float(config.get("regression_pct", 1.0)))
    except Exception as error:
        print(f"ddpbench: could not write the report: {type(error).__name__}: {error}", file=sys.stderr,
              flush=True)
        state.record_failure()  # no report (a full or read-only disk, say): the sweep exits non-zero
        return
    print(f"ddpbench: report: {sweep_dir / 'report.md'}", flush=True)
