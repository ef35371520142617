"""Hydra callbacks: checks before a single run starts, the report when a multirun ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from ddpbench.errors import DdpbenchError, fail
from ddpbench.io import writable_dir_problem
from ddpbench.sweep.report import write_sweep_report


class DdpbenchCallback(Callback):
    """Checks a single run's config and output dir before it starts; writes ``report.md`` at the end of every multirun."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        from ddpbench.config import typed_trial
        from ddpbench.trial.checks import check_trial_config

        try:
            check_trial_config(typed_trial(config))
        except DdpbenchError as error:
            fail(str(error))
        run_dir = Path(str(config.hydra.run.dir))
        problem = writable_dir_problem(run_dir)
        if problem is not None:
            fail(f"cannot write the run dir {run_dir}: {problem}")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from ddpbench.config import typed

        try:
            cfg = typed(config)
        except DdpbenchError as error:
            fail(str(error))
        write_sweep_report(Path(str(config.hydra.sweep.dir)), cfg)
