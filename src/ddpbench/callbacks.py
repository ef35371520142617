"""Hydra callbacks: checks before a single run starts, the report when a multirun ends."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from ddpbench.io import writable_dir_problem
from omegaconf import DictConfig


def write_sweep_report(sweep_dir: Path, baseline: str = "native", budget_pct: float = 2.0) -> Any:
    """Write report.md, plots and results.csv into ``sweep_dir``; print where they are."""
    from ddpbench.report.build import write_report

    outcome = write_report([sweep_dir], sweep_dir, baseline=baseline, budget_pct=budget_pct)
    print(f"ddpbench: report: {sweep_dir / 'report.md'}", flush=True)
    return outcome


class DdpbenchCallback(Callback):
    """Checks a single run's config and output dir before it starts; writes ``report.md`` at the end of every multirun."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        from omegaconf import OmegaConf

        from ddpbench.errors import DdpbenchError
        from ddpbench.trial.runner import check_trial_config

        try:
            check_trial_config(OmegaConf.masked_copy(config, [k for k in config.keys() if k != "hydra"]))
        except DdpbenchError as error:
            print(f"ddpbench: error: {error}", file=sys.stderr, flush=True)
            raise SystemExit(2)
        run_dir = Path(str(config.hydra.run.dir))
        problem = writable_dir_problem(run_dir)
        if problem is not None:
            print(f"ddpbench: error: cannot write the run dir {run_dir}: {problem}", file=sys.stderr, flush=True)
            raise SystemExit(2)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        cluster = config.get("cluster")
        if cluster is not None and str(cluster.kind) == "static" and int(cluster.node_rank) != 0:
            print(f"ddpbench: node {cluster.node_rank} done; node 0 writes the report", flush=True)
            return
        if not any(sweep_dir.glob("*/trial.json")):
            return
        try:
            write_sweep_report(sweep_dir, baseline=str(config.baseline), budget_pct=float(config.budget_pct))
        except Exception as error:  # a report failure must not hide the trials' own outcome
            print(f"ddpbench: could not write the report: {type(error).__name__}: {error}", file=sys.stderr,
                  flush=True)
            from ddpbench import state

            state.record_failure()  # no report (a full or read-only disk): the sweep exits non-zero
