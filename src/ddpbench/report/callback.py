"""Hydra callback that writes the sweep's report when a multirun ends."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


def write_sweep_report(sweep_dir: Path, baseline: str = "native", budget_pct: float = 2.0) -> Any:
    """Write report.md, plots and results.csv into ``sweep_dir``; print where they are."""
    from ddpbench.report.build import write_report

    outcome = write_report([sweep_dir], sweep_dir, baseline=baseline, budget_pct=budget_pct)
    print(f"ddpbench: report: {sweep_dir / 'report.md'}", flush=True)
    return outcome


class ReportCallback(Callback):
    """Writes ``report.md`` in the sweep dir at the end of every multirun."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not any(sweep_dir.glob("*/trial.json")):
            return
        try:
            write_sweep_report(sweep_dir, baseline=str(config.baseline), budget_pct=float(config.budget_pct))
        except Exception as error:  # a report failure must not hide the trials' own outcome
            print(f"ddpbench: could not write the report: {type(error).__name__}: {error}", file=sys.stderr,
                  flush=True)
