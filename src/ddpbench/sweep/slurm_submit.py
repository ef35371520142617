"""One SLURM job per trial, every wait bounded: the substance of ``hydra/launcher=ddpbench_slurm``.

hydra-submitit-launcher ends with ``job.results()``, which waits forever for a job that died without
writing its result (scancel, out of memory, time limit, node failure) on a cluster without accounting.
Here each trial is submitted as one job (``nodes = cluster.nnodes``, one task per node) and awaited with
:func:`ddpbench.sweep.slurm_wait.await_job`. A job that ended without task 0's result gets a ``failed``
``trial.json`` in its job dir (unless node 0 wrote one), naming the SLURM state and submitit's logs; a job
past its deadline is cancelled and recorded as ``timeout``. The sweeper always gets the usual summary.

``timeout_min: null`` means ``ceil((trial timeout + wait_margin_s) / 60)`` per trial, so the in-job watchdog
fires first, then SLURM's limit, then the submitter's deadline.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import DictConfig, OmegaConf, open_dict

from ddpbench.cluster.slurm_state import SlurmStateError, is_terminal, job_state
from ddpbench.formats.trial_record import TRIAL_FILE
from ddpbench.sweep.slurm_wait import SLURM_CALL_TIMEOUT_S, Bounds, JobWait, await_job, scancel
from ddpbench.sweep.validate import task_config

log = logging.getLogger(__name__)

#: launcher keys that are ddpbench's, not submitit executor parameters
OWN_KEYS = ("wait_margin_s", "queue_timeout_s", "poll_s")


@dataclass
class Submitted:
    """One trial handed to SLURM and what is needed to account for it."""

    idx: int
    overrides: List[str]
    cfg: DictConfig
    job_dir: Path
    trial_timeout_s: float
    limit_s: float
    job: Any = None
    submitted_epoch: float = 0.0
    submitted: float = 0.0
    wait: Optional[JobWait] = None

    @property
    def state(self) -> Optional[str]:
        return self.wait.state if self.wait is not None else "PENDING"


def tasks_of(job: Any) -> List[Any]:
    """The submitit jobs of every task (= node) of ``job``."""
    return [job.task(i) for i in range(job.num_tasks)]


def executor_for(launcher_params: Mapping[str, Any]) -> Tuple[Any, Dict[str, Any]]:
    """submitit's SLURM executor for the launcher's params and the parameters to update it with."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    params = {k: v for k, v in launcher_params.items() if k not in (*OWN_KEYS, "_target_")}
    init_params = {"folder": params["submitit_folder"]}
    if "max_num_timeout" in params:
        init_params["slurm_max_num_timeout"] = params["max_num_timeout"]
    executor = submitit.AutoExecutor(cluster="slurm", **init_params)
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    update = {key if key in base else f"slurm_{key}": value for key, value in params.items()
              if key not in ("submitit_folder", "max_num_timeout")}
    if update.get("slurm_setup") is None:
        update.pop("slurm_setup", None)
    return executor, update


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[JobReturn]:
    """Submit ``job_overrides`` as one SLURM job each, await them in order; one JobReturn per job."""
    assert launcher.config is not None and len(job_overrides) > 0
    bounds: Bounds = launcher.bounds
    executor, params = executor_for(launcher.params)
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    returns: Dict[int, JobReturn] = {}
    submitted: List[Submitted] = []
    try:
        for offset, overrides in enumerate(job_overrides):
            item = _prepare(launcher, overrides, initial_job_idx + offset, bounds)
            done = _already_ok(item)
            if done is not None:
                returns[item.idx] = job_return(item, done)
                continue
            log.info(f"\t#{item.idx} : {' '.join(filter_overrides(overrides))}")
            executor.update_parameters(**{**params, "timeout_min": int(item.limit_s // 60)})
            item.submitted_epoch = time.time()
            item.submitted = time.monotonic()
            item.job = executor.submit(launcher, list(overrides), "hydra.sweep.dir", item.idx,
                                       f"job_id_for_{item.idx}", Singleton.get_state())
            submitted.append(item)
        for item in submitted:
            returns[item.idx] = _await(item, bounds)
    except BaseException:
        for item in submitted:
            if item.idx not in returns:
                scancel(item.job.job_id)
        raise
    return [returns[initial_job_idx + offset] for offset in range(len(job_overrides))]


def _prepare(launcher: Any, overrides: Sequence[str], idx: int, bounds: Bounds) -> Submitted:
    from ddpbench.config import typed
    from ddpbench.trial.runner import trial_timeout_s

    cfg = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
    with open_dict(cfg.hydra.job):
        cfg.hydra.job.num = idx
    job_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
    timeout = trial_timeout_s(typed(task_config(cfg)))
    minutes = launcher.params.get("timeout_min")
    if minutes is None:
        minutes = max(1, math.ceil((timeout + bounds.wait_margin_s) / 60.0))
    return Submitted(idx, list(overrides), cfg, job_dir, timeout, float(minutes) * 60.0)


def _already_ok(item: Submitted) -> Optional[Dict[str, Any]]:
    """The summary of an ok trial.json of the same config (resume), else None: nothing to submit."""
    from ddpbench.config import to_plain, typed
    from ddpbench.formats import trial_record as record
    from ddpbench.trial.attempts import previous_ok
    from ddpbench.trial.summary import summary_of

    cfg = typed(task_config(item.cfg))
    if not cfg.trial.resume:
        return None
    try:
        previous = previous_ok(item.job_dir, record.config_hash(to_plain(cfg)))
    except Exception:  # an unreadable old record: just run the trial
        return None
    if previous is None:
        return None
    return summary_of({**previous, "resumed": True})


def _all_results(job: Any) -> bool:
    tasks = tasks_of(job)
    for task in tasks:
        folder = task.paths.folder
        try:
            folder.chmod(folder.stat().st_mode)  # refresh a network filesystem's cache
        except OSError:
            pass
    return all(task.paths.result_pickle.exists() for task in tasks)


def _await(item: Submitted, bounds: Bounds) -> JobReturn:
    job = item.job
    item.wait = await_job(job.job_id, bounds=bounds, limit_s=item.limit_s, submitted=item.submitted,
                          has_result=lambda: _all_results(job))
    if item.wait.problem:
        return _no_result(item, "timeout", item.wait.problem)
    if item.wait.started is None or not is_terminal(item.wait.state):
        try:  # the final state, for the record (results can appear before the first poll)
            item.wait.state = job_state(job.job_id, timeout=SLURM_CALL_TIMEOUT_S)
        except SlurmStateError:
            pass
    if job.task(0).paths.result_pickle.exists():
        return _from_result(item)
    return _no_result(item, "failed", f"SLURM job {job.job_id} ended {item.state or '(forgotten)'} without a "
                      "result (cancelled, out of memory, time limit or node failure)")


def _from_result(item: Submitted) -> JobReturn:
    from submitit.core import utils

    try:
        outcome, result = utils.pickle_load(item.job.task(0).paths.result_pickle)
    except Exception as error:  # truncated pickle: count it as a job without a result
        return _no_result(item, "failed", f"SLURM job {item.job.job_id}: unreadable result "
                          f"({type(error).__name__}: {error})")
    if outcome == "success" and isinstance(result, JobReturn):
        _annotate(item)
        return result
    lines = str(result).strip().splitlines()
    detail = lines[-1] if lines else "no traceback"
    return _no_result(item, "failed", f"SLURM job {item.job.job_id}: the job raised: {detail}")


def slurm_logs(job_id: str, state: Optional[str], tasks: Sequence[Any]) -> Dict[str, Any]:
    """``logs`` entries naming a SLURM job and its submitit logs (one per task = node)."""
    return {
        "slurm_job_id": str(job_id),
        "slurm_state": state,
        "slurm_stdout": [str(task.paths.stdout) for task in tasks],
        "slurm_stderr": [str(task.paths.stderr) for task in tasks],
    }


def _written_by_job(item: Submitted) -> Optional[Dict[str, Any]]:
    """The trial.json node 0 wrote for this job (newer than the submission), else None."""
    from ddpbench.io import read_json

    path = item.job_dir / TRIAL_FILE
    try:
        if path.stat().st_mtime < item.submitted_epoch:
            return None
        trial = read_json(path)
    except (OSError, ValueError):
        return None
    return trial if isinstance(trial, dict) and trial.get("status") else None


def _annotate(item: Submitted) -> None:
    """Add the SLURM job id, state and submitit log paths to the ``logs`` of the trial.json the job wrote."""
    from ddpbench.io import write_json_atomic

    trial = _written_by_job(item)
    if trial is None or trial.get("resumed"):
        return
    logs = trial.get("logs")
    trial["logs"] = {**(logs if isinstance(logs, dict) else {}),
                     **slurm_logs(item.job.job_id, item.state, tasks_of(item.job))}
    try:
        write_json_atomic(item.job_dir / TRIAL_FILE, trial)
    except OSError as error:
        log.warning(f"could not add the SLURM log paths to {item.job_dir / 'trial.json'}: {error}")


def _no_result(item: Submitted, status: str, error: str) -> JobReturn:
    """Write the trial.json the dead job could not (unless node 0 wrote one for this job), return it."""
    from ddpbench.trial.summary import summary_of

    log.warning(error)
    written = _written_by_job(item)
    if written is not None:
        _annotate(item)
        return job_return(item, summary_of(written))
    return job_return(item, summary_of(_failed_record(item, status, error)))


def _failed_record(item: Submitted, status: str, error: str) -> Dict[str, Any]:
    """Write and return the ``status`` record of a job that left none: in the attempt its node 0 started, else a new one."""
    from ddpbench.config import to_plain, typed
    from ddpbench.io import write_json_atomic
    from ddpbench.formats import trial_record as record
    from ddpbench.trial import environment
    from ddpbench.trial.attempts import attempt_of_launch
    from ddpbench.trial.job import job_info_from_hydra
    from ddpbench.trial.process import tail
    from ddpbench.trial.runner import trial_meta

    task_cfg = typed(task_config(item.cfg))
    tasks = tasks_of(item.job)
    stdout = [str(task.paths.stdout) for task in tasks]
    stderr = [str(task.paths.stderr) for task in tasks]
    info = job_info_from_hydra(item.cfg.hydra, job_dir=item.job_dir, job_num=item.idx, multirun=True)
    started_at = dt.datetime.fromtimestamp(item.submitted_epoch, dt.timezone.utc).isoformat(timespec="seconds")
    ended_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    meta = trial_meta(task_cfg, info, started_at=started_at, ended_at=ended_at, timeout_s=item.trial_timeout_s)
    item.job_dir.mkdir(parents=True, exist_ok=True)
    attempt = attempt_of_launch(item.job_dir, str(item.job.job_id))  # SLURM's run token is the job id
    trial = record.build_trial_record(
        meta=meta, config=to_plain(task_cfg), status=status, exit_code=None, error=error, wall_s=None,
        spawn_epoch=item.submitted_epoch, ranks=[], nodes=[], traceml=None,
        environment=environment.describe([], []),
        logs={"stdout": stdout, "stderr": stderr,
              "tail": "\n".join(tail(p, 20) for p in stderr if Path(p).exists()) or None,
              **slurm_logs(item.job.job_id, item.state, tasks)},
        attempt=attempt.section(),
    )
    write_json_atomic(item.job_dir / TRIAL_FILE, trial)
    return trial


def job_return(item: Submitted, summary: Dict[str, Any]) -> JobReturn:
    """A completed JobReturn carrying ``summary`` as the job's return value."""
    ret = JobReturn()
    ret.overrides = list(item.overrides)
    ret.cfg = task_config(item.cfg)
    ret.hydra_cfg = None
    ret.working_dir = str(item.job_dir)
    ret.task_name = str(item.cfg.hydra.job.name)
    ret.status = JobStatus.COMPLETED
    ret.return_value = summary
    return ret


def submission_script(launcher_params: Mapping[str, Any], timeout_min: int = 10,
                      folder: str = "/tmp/ddpbench-preview") -> str:
    """The sbatch script submitit would write for ``hydra.launcher`` (resolved, as a dict); nothing is submitted.

    Uses submitit's private ``_make_submission_file_text`` (submitit is bounded in pyproject.toml to the
    versions tested; ``tests/test_packaging.py`` checks the installed one).
    """
    executor, params = executor_for({**launcher_params, "submitit_folder": folder})
    minutes = params.get("timeout_min") or timeout_min
    executor.update_parameters(**{**params, "timeout_min": int(minutes)})
    slurm = executor._executor
    return str(slurm._make_submission_file_text(slurm._submitit_command_str, "preview"))
