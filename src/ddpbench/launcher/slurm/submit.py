"""One SLURM job per Hydra job, at most ``array_parallelism`` at once, every wait bounded (``hydra/launcher=
ddpbench_slurm``, docs/slurm.md). For a ddpbench trial it also skips an ok trial (resume), sizes the time limit from
the trial's timeout, and writes a ``failed``/``timeout`` ``trial.json`` for a job that left no result."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import time
from collections import deque
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Deque, Dict, List, Optional, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import DictConfig, OmegaConf, open_dict

from ddpbench.choices import TrialStatus
from ddpbench.cluster.slurm.wait import (SLURM_CALL_TIMEOUT_S, Bounds, JobWait, SlurmStateError, await_job,
                                         is_terminal, job_state, scancel)
from ddpbench.config import DdpbenchConfig, typed_trial
from ddpbench.formats.trial_record import TRIAL_FILE, build_trial_record, config_hash
from ddpbench.io import read_json, write_json_atomic
from ddpbench.launcher.slurm.allocation import add_slurm_logs
from ddpbench.trial import environment
from ddpbench.trial.attempts import attempt_of_launch, previous_ok
from ddpbench.trial.job import job_info_from_hydra
from ddpbench.trial.launch import utc_now
from ddpbench.trial.process import tail
from ddpbench.trial.record import trial_meta
from ddpbench.trial.runner import trial_timeout_s
from ddpbench.trial.summary import summary_of

log = logging.getLogger(__name__)

#: minutes of SLURM time limit when neither ``timeout_min`` nor a trial timeout says (submitit_slurm's default)
DEFAULT_TIMEOUT_MIN = 60


@dataclass
class Submitted:
    """One Hydra job handed to SLURM and what is needed to account for it."""

    idx: int
    overrides: List[str]
    cfg: DictConfig
    job_dir: Path
    # the trial's typed config when the app is ddpbench's, else None
    trial: Optional[DdpbenchConfig]
    trial_timeout_s: Optional[float]
    limit_s: float
    job: Any = None
    submitted_epoch: float = 0.0
    submitted: float = 0.0
    wait: Optional[JobWait] = None

    @property
    def state(self) -> Optional[str]:
        return self.wait.state if self.wait is not None else "PENDING"

    @property
    def tasks(self) -> List[Any]:
        """The submitit jobs of every task (= node) of the job."""
        return [self.job.task(i) for i in range(self.job.num_tasks)]

    def slurm_logs(self) -> Dict[str, Any]:
        """``logs`` entries naming the SLURM job and its submitit logs (one per task = node)."""
        return {"slurm_job_id": str(self.job.job_id), "slurm_state": self.state,
                "slurm_stdout": [str(task.paths.stdout) for task in self.tasks],
                "slurm_stderr": [str(task.paths.stderr) for task in self.tasks]}


class Submitter:
    """Runs one batch of a launcher's jobs on SLURM; ``launcher`` (BoundedSlurmLauncher) is also what a job runs."""

    def __init__(self, launcher: Any) -> None:
        import submitit
        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

        self.launcher = launcher
        self.params: Dict[str, Any] = dict(launcher.params)
        self.bounds = Bounds.from_params(self.params)
        own = {f.name for f in fields(Bounds)} | {"_target_"}  # ddpbench's keys, not submitit executor parameters
        params = {k: v for k, v in self.params.items() if k not in own}
        init = {"folder": params.pop("submitit_folder")}
        if "max_num_timeout" in params:
            init["slurm_max_num_timeout"] = params.pop("max_num_timeout")
        self.executor = submitit.AutoExecutor(cluster="slurm", **init)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        self.executor_params = {key if key in base else f"slurm_{key}": value for key, value in params.items()
                                if not (key == "setup" and value is None)}

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[JobReturn]:
        """Submit ``job_overrides`` as one SLURM job each, at most ``array_parallelism`` at once; one JobReturn each."""
        config = self.launcher.config
        assert config is not None and len(job_overrides) > 0
        sweep_dir = Path(str(config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in config.hydra.sweep:
            sweep_dir.chmod(int(config.hydra.sweep.mode, 8))
        at_once = max(1, int(self.params.get("array_parallelism") or 1))
        returns: Dict[int, JobReturn] = {}
        running: Deque[Submitted] = deque()
        try:
            for offset, overrides in enumerate(job_overrides):
                item = self.prepare(overrides, initial_job_idx + offset)
                done = self.already_ok(item)
                if done is not None:
                    returns[item.idx] = job_return(item, done)
                    continue
                while len(running) >= at_once:
                    finished = running.popleft()
                    returns[finished.idx] = self.await_result(finished)
                self.submit(item)
                running.append(item)
            while running:
                returns[running[0].idx] = self.await_result(running[0])
                running.popleft()
        except BaseException:
            for item in running:
                scancel(item.job.job_id)
            raise
        return [returns[initial_job_idx + offset] for offset in range(len(job_overrides))]

    def prepare(self, overrides: Sequence[str], idx: int) -> Submitted:
        """The job's config, its dir and its SLURM time limit."""
        cfg = self.launcher.hydra_context.config_loader.load_sweep_config(self.launcher.config, list(overrides))
        with open_dict(cfg.hydra.job):
            cfg.hydra.job.num = idx
        job_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
        trial = typed_trial(cfg) if "trial" in cfg else None
        timeout = trial_timeout_s(trial) if trial is not None else None
        minutes = self.params.get("timeout_min")
        if minutes is None:
            minutes = (DEFAULT_TIMEOUT_MIN if timeout is None
                       else max(1, math.ceil((timeout + self.bounds.wait_margin_s) / 60.0)))
        return Submitted(idx, list(overrides), cfg, job_dir, trial, timeout, float(minutes) * 60.0)

    def submit(self, item: Submitted) -> None:
        log.info(f"\t#{item.idx} : {' '.join(filter_overrides(item.overrides))}")
        self.executor.update_parameters(**{**self.executor_params, "timeout_min": int(item.limit_s // 60)})
        item.submitted_epoch = time.time()
        item.submitted = time.monotonic()
        item.job = self.executor.submit(self.launcher, item.overrides, "hydra.sweep.dir", item.idx,
                                        f"job_id_for_{item.idx}", Singleton.get_state())

    @staticmethod
    def already_ok(item: Submitted) -> Optional[Dict[str, Any]]:
        """The summary of an ok trial.json of the same config (resume), else None: something to submit."""
        if item.trial is None or not item.trial.trial.resume:
            return None
        try:
            previous = previous_ok(item.job_dir, config_hash(asdict(item.trial)))
        except Exception:  # an unreadable old record: just run the trial
            return None
        return None if previous is None else summary_of({**previous, "resumed": True})

    def await_result(self, item: Submitted) -> JobReturn:
        """Wait (bounded) for ``item``'s job; its JobReturn, or a failed one when the job left no result."""
        job = item.job
        item.wait = await_job(job.job_id, bounds=self.bounds, limit_s=item.limit_s, submitted=item.submitted,
                              has_result=lambda: _all_results(item.tasks))
        if item.wait.problem:
            return no_result(item, TrialStatus.timeout, item.wait.problem)
        if item.wait.started is None or not is_terminal(item.wait.state):
            with contextlib.suppress(SlurmStateError):  # the final state (results can appear before the first poll)
                item.wait.state = job_state(job.job_id, timeout=SLURM_CALL_TIMEOUT_S)
        if job.task(0).paths.result_pickle.exists():
            return from_result(item)
        return no_result(item, TrialStatus.failed, f"SLURM job {job.job_id} ended {item.state or '(forgotten)'} without a "
                         "result (cancelled, out of memory, time limit or node failure)")


def _all_results(tasks: Sequence[Any]) -> bool:
    for task in tasks:
        folder = task.paths.folder
        with contextlib.suppress(OSError):
            folder.chmod(folder.stat().st_mode)  # refresh a network filesystem's cache
    return all(task.paths.result_pickle.exists() for task in tasks)


def from_result(item: Submitted) -> JobReturn:
    """The JobReturn task 0 pickled (the trial record annotated with the SLURM job)."""
    from submitit.core import utils

    try:
        outcome, result = utils.pickle_load(item.job.task(0).paths.result_pickle)
    except Exception as error:  # truncated pickle: count it as a job without a result
        return no_result(item, TrialStatus.failed, f"SLURM job {item.job.job_id}: unreadable result "
                         f"({type(error).__name__}: {error})")
    if outcome == "success" and isinstance(result, JobReturn):
        annotate(item)
        return result
    lines = str(result).strip().splitlines()
    return no_result(item, TrialStatus.failed, f"SLURM job {item.job.job_id}: the job raised: "
                     f"{lines[-1] if lines else 'no traceback'}")


def annotate(item: Submitted) -> None:
    """Add the SLURM job id, state and submitit log paths to the ``logs`` of the trial.json the job wrote."""
    if item.trial is not None:
        add_slurm_logs(item.job_dir / TRIAL_FILE, item.slurm_logs(), since_epoch=item.submitted_epoch)


def no_result(item: Submitted, status: TrialStatus, error: str) -> JobReturn:
    """A job that left no result: a trial's record (node 0's, else one written here), or a failed JobReturn."""
    log.warning(error)
    if item.trial is None:
        ret = job_return(item, None)
        ret.status, ret.return_value = JobStatus.FAILED, RuntimeError(error)
        return ret
    path, written = item.job_dir / TRIAL_FILE, None  # the trial.json node 0 wrote for this job
    with contextlib.suppress(OSError, ValueError):
        if path.stat().st_mtime >= item.submitted_epoch:
            written = read_json(path)
    if isinstance(written, dict) and written.get("status"):
        annotate(item)
        return job_return(item, summary_of(written))
    return job_return(item, summary_of(failed_record(item, status, error)))


def failed_record(item: Submitted, status: TrialStatus, error: str) -> Dict[str, Any]:
    """Write and return the ``status`` record of a trial whose job left none: in the attempt its node 0 started, else a new one."""
    assert item.trial is not None and item.trial_timeout_s is not None
    slurm = item.slurm_logs()
    info = job_info_from_hydra(item.cfg.hydra, job_dir=item.job_dir, job_num=item.idx, multirun=True)
    started_at = dt.datetime.fromtimestamp(item.submitted_epoch, dt.timezone.utc).isoformat(timespec="seconds")
    meta = trial_meta(item.trial, info, started_at=started_at, ended_at=utc_now(), timeout_s=item.trial_timeout_s)
    item.job_dir.mkdir(parents=True, exist_ok=True)
    attempt = attempt_of_launch(item.job_dir, str(item.job.job_id))  # SLURM's run token is the job id
    trial = build_trial_record(
        meta=meta, config=asdict(item.trial), status=status, exit_code=None, error=error, wall_s=None,
        spawn_epoch=item.submitted_epoch, ranks=[], nodes=[], traceml=None,
        environment=environment.describe([], []),
        logs={"stdout": slurm["slurm_stdout"], "stderr": slurm["slurm_stderr"],
              "tail": "\n".join(tail(p, 20) for p in slurm["slurm_stderr"] if Path(p).exists()) or None, **slurm},
        attempt=attempt.section(),
    )
    write_json_atomic(item.job_dir / TRIAL_FILE, trial)
    return trial


def job_return(item: Submitted, summary: Optional[Dict[str, Any]]) -> JobReturn:
    """A completed JobReturn carrying ``summary`` as the job's return value."""
    return JobReturn(overrides=list(item.overrides),
                     cfg=OmegaConf.masked_copy(item.cfg, [str(k) for k in item.cfg if k != "hydra"]),
                     working_dir=str(item.job_dir), task_name=str(item.cfg.hydra.job.name),
                     status=JobStatus.COMPLETED, _return_value=summary)
