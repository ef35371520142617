"""The Hydra application: ``python -m ddpbench [-m] key=value ...``. One Hydra job = one trial; a multirun is a
sweep ordered by the paired sweeper, then ``report.md``. Exits non-zero when any trial did not succeed.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from typing import Any, Dict, List, Optional

import hydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ddpbench import __version__, state
from ddpbench.config import register_configs, typed_trial
from ddpbench.errors import DdpbenchError, fail
from ddpbench.formats.condition import job_dirname
from hydra_plugins.ddpbench_sweeper import register as register_plugins


@functools.lru_cache(maxsize=None)
def unique_name() -> str:
    """A sweep or run folder name that two drivers started in the same second do not share; one per process."""
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
        outcome = run_trial(typed_trial(cfg), job)
    except DdpbenchError as error:
        fail(str(error))
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
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises a composition error instead of printing it over several lines
    try:
        hydra_main()
    except (HydraException, OmegaConfBaseException) as error:
        fail(composition_error_line(error))
    if state.failures():
        raise SystemExit(1)


#: OmegaConf's detail lines below its message (the key is in the override the message quotes)
_DETAIL_LINES = ("full_key:", "reference_type=", "object_type=")


def composition_error_line(error: BaseException) -> str:
    """A Hydra or OmegaConf error met while composing the config (and its OmegaConf cause) as one line, without
    OmegaConf's detail lines and Hydra's search path; a tab-indented listing joined by commas."""
    texts = [str(error)]
    if isinstance(error.__cause__, OmegaConfBaseException):
        texts.append(str(error.__cause__))
    line = ""
    for raw in "\n".join(texts).splitlines():
        text = raw.strip()
        if text.startswith("Config search path"):  # Hydra's list of where it looked: not the user's input
            break
        if not text or text.startswith(_DETAIL_LINES):
            continue
        if not line:
            line = text
        elif line.endswith(":"):
            line += " " + text
        else:
            line += (", " if raw.startswith("\t") else ": ") + text
    return line or type(error).__name__
