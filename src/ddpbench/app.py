"""The Hydra application: ``python -m ddpbench [-m] key=value ...``. One Hydra job = one trial.

A single run (no ``-m``) is one trial that prints its headline figures. A multirun is a sweep
ordered by the paired sweeper (``hydra/sweeper=ddpbench``: ``hydra/sweeper=paired`` with
:class:`ddpbench.sweep.driver.SweepDriver`; the app registers ddpbench's sweeper and launcher itself, so any
install mode runs it, whether or not Hydra's plugin scan sees them); when it ends, the report
callback writes ``report.md``. The process exits non-zero when any trial did not succeed.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, List, Optional

import hydra
from omegaconf import DictConfig, OmegaConf

from ddpbench import __version__, state
from ddpbench.config import register_configs, typed
from ddpbench.errors import DdpbenchError, fail
from ddpbench.formats.condition import job_dirname
from hydra_plugins.ddpbench_sweeper import register as register_plugins


def unique_name() -> str:
    """A sweep or run folder name that two drivers started in the same second do not share."""
    return time.strftime("%Y-%m-%d_%H-%M-%S") + f"_{os.getpid()}"


if not OmegaConf.has_resolver("ddpbench_unique"):
    OmegaConf.register_new_resolver("ddpbench_unique", unique_name, use_cache=True)
if not OmegaConf.has_resolver("ddpbench_dirname"):
    OmegaConf.register_new_resolver("ddpbench_dirname", job_dirname)
register_configs()
register_plugins()


@hydra.main(version_base="1.3", config_path="pkg://ddpbench.conf", config_name="config")
def hydra_main(cfg: DictConfig) -> Optional[Dict[str, Any]]:
    """Run the one trial this Hydra job stands for."""
    from ddpbench.formats.trial_record import TRIAL_FILE
    from ddpbench.trial.job import current_job
    from ddpbench.trial.runner import run_trial
    from ddpbench.trial.summary import TrialRecord, headline

    job = current_job()
    try:
        outcome = run_trial(typed(cfg), job)
    except DdpbenchError as error:
        fail(str(error))
        return None
    if isinstance(outcome, TrialRecord) and not job.multirun:
        print(headline(outcome.record), flush=True)
        if not outcome.ok:
            print(f"error: {outcome.record.get('error')}", file=sys.stderr, flush=True)
            state.record_failure()
        print(f"trial: {job.job_dir / TRIAL_FILE}", flush=True)
    return outcome.summary()


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point (``ddpbench``, ``python -m ddpbench``); ``--version`` prints ddpbench's version."""
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    if "--version" in sys.argv[1:]:
        print(f"ddpbench {__version__}", flush=True)
        raise SystemExit(0)
    state.reset()
    hydra_main()
    if state.failures():
        raise SystemExit(1)
