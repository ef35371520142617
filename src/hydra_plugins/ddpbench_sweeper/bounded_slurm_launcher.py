"""``hydra/launcher=ddpbench_slurm``: hydra-submitit-launcher's SLURM launcher with bounded waits.

The stock launcher ends with ``job.results()``, which waits forever for a job that died without writing
its result (scancel, out of memory, time limit, node failure) when the cluster has no accounting
(``sacct``). This launcher submits each trial as one SLURM job (``nodes = cluster.nnodes``, one task per
node) and then polls, with deadlines, both submitit's result files and the controller's job state
(:mod:`ddpbench.cluster.slurm_state`, ``scontrol`` with a timeout):

- a job may stay queued (PENDING) at most ``cluster.slurm.queue_timeout_s``;
- once running, at most its time limit (``timeout_min``) + 60 s;
- a job that ended (or was forgotten by the controller) without task 0's result gets a ``failed``
  ``trial.json`` in its job dir, naming the SLURM state and the submitit stdout/stderr logs; a job past its
  deadline is cancelled (``scancel``) and recorded as ``timeout``. Either way the sweeper gets the usual
  summary dict and the sweep goes on.

``timeout_min: null`` (the default, from ``cluster.slurm.timeout_min``) means: ``ceil((trial timeout +
wait_margin_s) / 60)`` per trial, the trial timeout being the in-job watchdog's (``trial.timeout_s`` or the
automatic one), so the in-job watchdog fires first, then SLURM's limit, then this launcher's deadline.

Jobs of one batch are submitted together and awaited in order; the paired sweeper hands over batches of
one (``max_batch_size: 1``), so trials run one at a time in the sweeper's order. No torch import here.

With ``cluster.slurm.one_allocation=true`` the paired sweeper calls :func:`run_one_allocation` instead:
one plain ``sbatch`` job runs the whole sweep (see :mod:`ddpbench.cluster.slurm_steps`), waited for with
the same bounds (queue timeout, then its time limit + 60 s).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf, SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)

#: seconds allowed past the job's SLURM time limit before this launcher cancels it itself
PAST_LIMIT_S = 60.0
#: seconds to wait for task 0's result file once the controller says the job ended
RESULT_GRACE_S = 5.0
#: seconds one scontrol / scancel call may take
SLURM_CALL_TIMEOUT_S = 15.0
#: launcher keys that are ours, not submitit executor parameters
OWN_KEYS = ("wait_margin_s", "queue_timeout_s", "poll_s")


@dataclass
class DdpbenchSlurmConf(SlurmQueueConf):
    """submitit_slurm, filled from ``cluster.slurm`` / ``cluster.nnodes`` by interpolation."""

    _target_: str = "hydra_plugins.ddpbench_sweeper.bounded_slurm_launcher.BoundedSlurmLauncher"
    name: str = "ddpbench"
    partition: Optional[str] = "${cluster.slurm.partition}"
    nodes: int = "${cluster.nnodes}"  # type: ignore[assignment]
    # one torchrun / traceml agent per node; it starts cluster.nproc_per_node ranks
    tasks_per_node: int = 1
    gpus_per_node: Optional[int] = "${cluster.slurm.gpus_per_node}"  # type: ignore[assignment]
    cpus_per_task: Optional[int] = "${cluster.slurm.cpus_per_task}"  # type: ignore[assignment]
    mem_gb: Optional[int] = "${cluster.slurm.mem_gb}"  # type: ignore[assignment]
    # null = from each trial's timeout (see the module doc)
    timeout_min: Optional[int] = "${cluster.slurm.timeout_min}"  # type: ignore[assignment]
    setup: Optional[List[str]] = "${cluster.slurm.setup}"  # type: ignore[assignment]
    additional_parameters: Dict[str, Any] = "${cluster.slurm.additional_parameters}"  # type: ignore[assignment]
    # trials are timed: never run two of a batch at once
    array_parallelism: int = 1
    # submitit's USR2 before the time limit; short, so it falls after the in-job watchdog (see wait_margin_s)
    signal_delay_s: int = 30
    wait_margin_s: float = "${cluster.slurm.wait_margin_s}"  # type: ignore[assignment]
    queue_timeout_s: float = "${cluster.slurm.queue_timeout_s}"  # type: ignore[assignment]
    poll_s: float = "${cluster.slurm.poll_s}"  # type: ignore[assignment]


ConfigStore.instance().store(group="hydra/launcher", name="ddpbench_slurm", node=DdpbenchSlurmConf,
                             provider="ddpbench")


@dataclass
class _Pending:
    """One submitted trial and what is needed to account for it."""

    idx: int
    overrides: List[str]
    cfg: DictConfig
    job_dir: Path
    trial_timeout_s: float
    limit_s: float
    job: Any = None
    submitted_epoch: float = 0.0
    submitted: float = 0.0
    started: Optional[float] = None
    state: Optional[str] = "PENDING"
    notes: List[str] = field(default_factory=list)


def _scancel(job_id: str) -> None:
    try:
        subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=SLURM_CALL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        log.warning(f"scancel {job_id} failed: {error}")


class BoundedSlurmLauncher(SlurmLauncher):
    """SlurmLauncher whose every wait is bounded; a job that left no result becomes a failed trial."""

    def __init__(self, **params: Any) -> None:
        own = {key: params.pop(key) for key in OWN_KEYS if key in params}
        super().__init__(**params)
        self.wait_margin_s = float(own.get("wait_margin_s", 120.0))
        self.queue_timeout_s = float(own.get("queue_timeout_s", 3600.0))
        self.poll_s = max(0.1, float(own.get("poll_s", 1.0)))

    # ----------------------------------------------------------------------------------------- submit
    def _executor(self) -> Tuple[Any, Dict[str, Any]]:
        import submitit

        init_params = {"folder": self.params["submitit_folder"]}
        if "max_num_timeout" in self.params:
            init_params["slurm_max_num_timeout"] = self.params["max_num_timeout"]
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init_params)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        params = {
            key if key in base else f"{self._EXECUTOR}_{key}": value
            for key, value in self.params.items()
            if key not in ("submitit_folder", "max_num_timeout")
        }
        if params.get("slurm_setup") is None:
            params.pop("slurm_setup", None)
        return executor, params

    def _prepare(self, overrides: Sequence[str], idx: int) -> _Pending:
        from ddpbench.trial.runner import trial_timeout_s

        assert self.hydra_context is not None and self.config is not None
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(cfg.hydra.job):
            cfg.hydra.job.num = idx
        job_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
        task_cfg = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"])
        timeout = trial_timeout_s(task_cfg)
        minutes = self.params.get("timeout_min")
        if minutes is None:
            minutes = max(1, math.ceil((timeout + self.wait_margin_s) / 60.0))
        return _Pending(idx, list(overrides), cfg, job_dir, timeout, float(minutes) * 60.0)

    def _already_ok(self, pending: _Pending) -> Optional[Dict[str, Any]]:
        """The summary of an ok trial.json of the same config (resume), else None: nothing to submit."""
        from ddpbench.config import to_plain
        from ddpbench.formats import trial_record as record
        from ddpbench.trial.attempts import previous_ok

        cfg = OmegaConf.masked_copy(pending.cfg, [k for k in pending.cfg.keys() if k != "hydra"])
        if not cfg.trial.resume:
            return None
        try:
            previous = previous_ok(pending.job_dir, record.config_hash(to_plain(cfg)))
        except Exception:  # an unreadable old record: just run the trial
            return None
        if previous is None:
            return None
        previous["resumed"] = True
        return _summary(previous)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None
        assert len(job_overrides) > 0
        executor, params = self._executor()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info(f"Submitit 'slurm' (bounded) sweep output dir : {sweep_dir}")

        returns: Dict[int, JobReturn] = {}
        pendings: List[_Pending] = []
        try:
            for offset, overrides in enumerate(job_overrides):
                idx = initial_job_idx + offset
                pending = self._prepare(overrides, idx)
                done = self._already_ok(pending)
                if done is not None:
                    returns[idx] = self._job_return(pending, done)
                    continue
                log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
                executor.update_parameters(**{**params, "timeout_min": int(pending.limit_s // 60)})
                pending.submitted_epoch = time.time()
                pending.submitted = time.monotonic()
                pending.job = executor.submit(self, list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}",
                                              Singleton.get_state())
                pendings.append(pending)
            for pending in pendings:
                returns[pending.idx] = self._await(pending)
        except BaseException:
            for pending in pendings:
                if pending.job is not None and pending.idx not in returns:
                    _scancel(pending.job.job_id)
            raise
        return [returns[initial_job_idx + offset] for offset in range(len(job_overrides))]

    # ------------------------------------------------------------------------------------------- wait
    def _await(self, pending: _Pending) -> JobReturn:
        from ddpbench.cluster.slurm_state import SlurmStateError, is_terminal, job_state

        job = pending.job
        queue_deadline = pending.submitted + self.queue_timeout_s
        hard_deadline = queue_deadline + pending.limit_s + PAST_LIMIT_S
        ended_at: Optional[float] = None
        while True:
            now = time.monotonic()
            if self._all_results(job):
                break
            try:
                pending.state = job_state(job.job_id, timeout=SLURM_CALL_TIMEOUT_S)
            except SlurmStateError as error:
                pending.notes.append(str(error))
            else:
                base = (pending.state or "").split()[0].rstrip("+") if pending.state else None
                if base not in (None, "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED") and pending.started is None:
                    pending.started = now
                if is_terminal(pending.state):
                    ended_at = ended_at or now
                    if now - ended_at >= RESULT_GRACE_S:
                        break
                    time.sleep(0.5)
                    continue
            if pending.started is None and now >= queue_deadline:
                return self._give_up(pending, "timeout", f"SLURM job {job.job_id} did not start within "
                                     f"{self.queue_timeout_s:.0f} s (state {pending.state}); cancelled")
            limit = pending.limit_s + PAST_LIMIT_S
            if (pending.started is not None and now >= pending.started + limit) or now >= hard_deadline:
                return self._give_up(pending, "timeout", f"SLURM job {job.job_id} still {pending.state} "
                                     f"{limit:.0f} s after it started; cancelled")
            time.sleep(self.poll_s)
        if pending.started is None or not is_terminal(pending.state):
            try:  # the final state, for the record (results can appear before the first poll)
                pending.state = job_state(job.job_id, timeout=SLURM_CALL_TIMEOUT_S)
            except SlurmStateError:
                pass
        if job.task(0).paths.result_pickle.exists():
            return self._from_result(pending)
        return self._no_result(pending, "failed", f"SLURM job {job.job_id} ended {pending.state or '(forgotten)'} "
                               "without a result (cancelled, out of memory, time limit or node failure)")

    @staticmethod
    def _all_results(job: Any) -> bool:
        tasks = job._sub_jobs or [job]
        for task in tasks:
            folder = task.paths.folder
            try:
                folder.chmod(folder.stat().st_mode)  # refresh a network filesystem's cache
            except OSError:
                pass
        return all(task.paths.result_pickle.exists() for task in tasks)

    def _from_result(self, pending: _Pending) -> JobReturn:
        from submitit.core import utils

        task0 = pending.job.task(0)
        try:
            outcome, result = utils.pickle_load(task0.paths.result_pickle)
        except Exception as error:  # truncated pickle: count it as a job without a result
            return self._no_result(pending, "failed", f"SLURM job {pending.job.job_id}: unreadable result "
                                   f"({type(error).__name__}: {error})")
        if outcome == "success" and isinstance(result, JobReturn):
            self._annotate(pending)
            return result
        lines = str(result).strip().splitlines()
        detail = lines[-1] if lines else "no traceback"
        return self._no_result(pending, "failed", f"SLURM job {pending.job.job_id}: the job raised: {detail}")

    def _give_up(self, pending: _Pending, status: str, error: str) -> JobReturn:
        from ddpbench.cluster.slurm_state import SlurmStateError, wait_finished

        _scancel(pending.job.job_id)
        try:
            wait_finished(pending.job.job_id, timeout=30.0, poll=0.5)
        except (TimeoutError, SlurmStateError) as problem:
            error += f" ({problem})"
        return self._no_result(pending, status, error)

    # ------------------------------------------------------------------------------------ accounting
    def _no_result(self, pending: _Pending, status: str, error: str) -> JobReturn:
        """Write the trial.json the dead job could not (unless node 0 wrote one for this job), return it."""
        from ddpbench.io import read_json

        log.warning(error)
        path = pending.job_dir / "trial.json"
        try:
            if path.stat().st_mtime >= pending.submitted_epoch:
                written = read_json(path)
                if isinstance(written, dict) and written.get("status"):
                    self._annotate(pending)
                    return self._job_return(pending, _summary(written))
        except (OSError, ValueError):
            pass
        trial = self._failed_record(pending, status, error)
        return self._job_return(pending, _summary(trial))

    @staticmethod
    def _annotate(pending: _Pending) -> None:
        """Add the SLURM job id, state and submitit log paths to the ``logs`` of the trial.json the job wrote."""
        from ddpbench.io import read_json, write_json_atomic

        path = pending.job_dir / "trial.json"
        try:
            if path.stat().st_mtime < pending.submitted_epoch:
                return
            trial = read_json(path)
            if not isinstance(trial, dict) or trial.get("resumed"):
                return
            logs = trial.get("logs") if isinstance(trial.get("logs"), dict) else {}
            logs.update(_slurm_logs(pending.job, pending.state))
            trial["logs"] = logs
            write_json_atomic(path, trial)
        except (OSError, ValueError) as error:
            log.warning(f"could not add the SLURM log paths to {path}: {error}")

    def _failed_record(self, pending: _Pending, status: str, error: str) -> Dict[str, Any]:
        from ddpbench.config import to_plain
        from ddpbench.io import write_json_atomic
        from ddpbench.formats import trial_record as record
        from ddpbench.trial import environment
        from ddpbench.trial.process import tail
        from ddpbench.trial.job import job_info_from_hydra
        from ddpbench.trial.runner import trial_meta

        cfg = pending.cfg
        task_cfg = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"])
        plain = to_plain(task_cfg)
        job = pending.job
        tasks = job._sub_jobs or [job]
        stdout = [str(task.paths.stdout) for task in tasks]
        stderr = [str(task.paths.stderr) for task in tasks]
        info = job_info_from_hydra(cfg.hydra, job_dir=pending.job_dir, job_num=pending.idx, multirun=True)
        started_at = dt.datetime.fromtimestamp(pending.submitted_epoch, dt.timezone.utc).isoformat(timespec="seconds")
        ended_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        meta = trial_meta(task_cfg, info, started_at=started_at, ended_at=ended_at, timeout_s=pending.trial_timeout_s)
        trial = record.build_trial_record(
            meta=meta, config=plain, status=status, exit_code=None, error=error, wall_s=None,
            spawn_epoch=pending.submitted_epoch, ranks=[], nodes=[], traceml=None,
            environment=environment.describe([], []),
            logs={"stdout": stdout, "stderr": stderr,
                  "tail": "\n".join(tail(p, 20) for p in stderr if Path(p).exists()) or None,
                  **_slurm_logs(job, pending.state)},
        )
        pending.job_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(pending.job_dir / "trial.json", trial)
        return trial

    def _job_return(self, pending: _Pending, summary: Dict[str, Any]) -> JobReturn:
        ret = JobReturn()
        ret.overrides = list(pending.overrides)
        ret.cfg = OmegaConf.masked_copy(pending.cfg, [k for k in pending.cfg.keys() if k != "hydra"])
        ret.hydra_cfg = None
        ret.working_dir = str(pending.job_dir)
        ret.task_name = str(pending.cfg.hydra.job.name)
        ret.status = JobStatus.COMPLETED
        ret.return_value = summary
        return ret


def _slurm_logs(job: Any, state: Optional[str]) -> Dict[str, Any]:
    """``logs`` entries naming a SLURM job and its submitit logs (one per task = node)."""
    tasks = job._sub_jobs or [job]
    return {
        "slurm_job_id": str(job.job_id),
        "slurm_state": state,
        "slurm_stdout": [str(task.paths.stdout) for task in tasks],
        "slurm_stderr": [str(task.paths.stderr) for task in tasks],
    }


def submission_script(launcher_params: Dict[str, Any], timeout_min: int = 10, folder: str = "/tmp/ddpbench-preview") -> str:
    """The sbatch script submitit would write for ``hydra.launcher`` params (resolved): nothing is submitted.

    ``launcher_params``: the resolved ``hydra.launcher`` node as a dict (``_target_`` is ignored).
    """
    params = {k: v for k, v in launcher_params.items() if k != "_target_"}
    params["submitit_folder"] = folder
    launcher = BoundedSlurmLauncher(**params)
    executor, executor_params = launcher._executor()
    minutes = executor_params.get("timeout_min") or timeout_min
    executor.update_parameters(**{**executor_params, "timeout_min": int(minutes)})
    slurm = executor._executor
    return str(slurm._make_submission_file_text(slurm._submitit_command_str, "preview"))


def _summary(trial: Dict[str, Any]) -> Dict[str, Any]:
    from ddpbench.trial.summary import summary_of

    return summary_of(trial)


# ------------------------------------------------------------------------------------------ one_allocation
#: launcher / sweep overrides the in-allocation driver must not get (it runs the basic launcher in the same dir)
_OUTER_ONLY = ("hydra.launcher", "hydra/launcher", "hydra.sweep.dir", "sweep_name")


def _hydra_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def allocation_script(params: Dict[str, Any], command: List[str], sweep_dir: Path, minutes: int, cwd: Path) -> str:
    """The sbatch script of a ``one_allocation`` sweep: its batch step (first node) runs ``command``."""
    import shlex

    slurm_dir = sweep_dir / ".slurm"
    lines = ["#!/bin/bash", f"#SBATCH --job-name={params.get('name') or 'ddpbench'}",
             f"#SBATCH --nodes={int(params['nodes'])}", "#SBATCH --ntasks-per-node=1",
             f"#SBATCH --time={minutes}",
             f"#SBATCH --output={slurm_dir}/allocation-%j.out", f"#SBATCH --error={slurm_dir}/allocation-%j.err"]
    for key, option in (("partition", "partition"), ("cpus_per_task", "cpus-per-task"),
                        ("gpus_per_node", "gpus-per-node")):
        if params.get(key) is not None:
            lines.append(f"#SBATCH --{option}={params[key]}")
    if params.get("mem_gb") is not None:
        lines.append(f"#SBATCH --mem={params['mem_gb']}GB")
    for key, value in (params.get("additional_parameters") or {}).items():
        option = str(key).replace("_", "-")
        if value is True:
            lines.append(f"#SBATCH --{option}")
        elif value not in (None, False):
            lines.append(f"#SBATCH --{option}={value}")
    lines += [str(line) for line in (params.get("setup") or [])]
    lines += [f"cd {shlex.quote(str(cwd))}", " ".join(shlex.quote(arg) for arg in command),
              f'echo $? > {shlex.quote(str(slurm_dir))}/allocation-"$SLURM_JOB_ID".rc']
    return "\n".join(lines) + "\n"


def run_one_allocation(self: BoundedSlurmLauncher, arguments: Sequence[str], sweep_name: str,
                        trial_timeouts_s: Sequence[float]) -> int:
    """Submit the whole sweep as ONE job and wait for it (bounded); its exit status (1 when it left none).

    The job's batch script runs the same sweep with the basic launcher in the same sweep dir, where each trial
    is an srun step over every node (:mod:`ddpbench.cluster.slurm_steps`); its callback writes report.md.
    """
    import re
    import sys

    from ddpbench.cluster.slurm_state import SlurmStateError, is_terminal, job_state, wait_finished
    from ddpbench.io import read_json, write_json_atomic

    assert self.config is not None
    sweep_dir = Path(str(self.config.hydra.sweep.dir)).resolve()
    slurm_dir = sweep_dir / ".slurm"
    slurm_dir.mkdir(parents=True, exist_ok=True)
    overhead_s = 30.0  # per trial: interpreter start, srun step launch, node records
    total_s = sum(trial_timeouts_s) + overhead_s * len(trial_timeouts_s)
    minutes = self.params.get("timeout_min") or max(1, math.ceil((total_s + self.wait_margin_s) / 60.0))
    keep = [a for a in arguments if not a.lstrip("+~").startswith(_OUTER_ONLY)]
    keep += [str(o) for o in self.config.hydra.overrides.hydra if not str(o).lstrip("+~").startswith(_OUTER_ONLY)]
    command = [sys.executable, "-m", "ddpbench", "-m", *keep, "hydra/launcher=basic", f"sweep_name={sweep_name}",
               f"hydra.sweep.dir={_hydra_quote(str(sweep_dir))}"]
    script = slurm_dir / "allocation.sbatch"
    script.write_text(allocation_script(self.params, command, sweep_dir, int(minutes), Path.cwd()))
    submitted_epoch = time.time()
    try:
        proc = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                              timeout=SLURM_CALL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        print(f"ddpbench: error: sbatch failed: {error}", file=sys.stderr, flush=True)
        return 1
    if proc.returncode != 0:
        print(f"ddpbench: error: sbatch failed: {proc.stderr.strip()}", file=sys.stderr, flush=True)
        return 1
    job_id = proc.stdout.strip().split(";")[0]
    out, err = slurm_dir / f"allocation-{job_id}.out", slurm_dir / f"allocation-{job_id}.err"
    print(f"ddpbench: one_allocation: SLURM job {job_id} runs all {len(trial_timeouts_s)} trials; log {out}",
          flush=True)
    submitted = time.monotonic()
    started: Optional[float] = None
    state: Optional[str] = "PENDING"
    limit_s = float(minutes) * 60.0 + PAST_LIMIT_S
    problem = ""
    try:
        while True:
            now = time.monotonic()
            try:
                state = job_state(job_id, timeout=SLURM_CALL_TIMEOUT_S)
            except SlurmStateError as error:
                log.warning(str(error))
            else:
                if is_terminal(state):
                    break
                if started is None and (state or "").split()[0] not in ("PENDING", "REQUEUED"):
                    started = now
            if started is None and now >= submitted + self.queue_timeout_s:
                problem = f"SLURM job {job_id} did not start within {self.queue_timeout_s:.0f} s; cancelled"
            elif started is not None and now >= started + limit_s:
                problem = f"SLURM job {job_id} still {state} {limit_s:.0f} s after it started; cancelled"
            if problem:
                _scancel(job_id)
                try:
                    state = wait_finished(job_id, timeout=30.0, poll=0.5)
                except (TimeoutError, SlurmStateError):
                    pass
                break
            time.sleep(self.poll_s)
    except BaseException:
        _scancel(job_id)
        raise
    rc_file = slurm_dir / f"allocation-{job_id}.rc"
    deadline = time.monotonic() + RESULT_GRACE_S
    while not rc_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        rc = int(rc_file.read_text().strip())
    except (OSError, ValueError):
        rc = 1
        problem = problem or f"SLURM job {job_id} ended {state or '(forgotten)'} without an exit status"
    # every trial this job wrote gets the job's id, state and logs
    slurm_logs = {"slurm_job_id": job_id, "slurm_state": state, "slurm_stdout": [str(out)], "slurm_stderr": [str(err)]}
    for path in sorted(sweep_dir.glob("*/trial.json")):
        try:
            if path.stat().st_mtime < submitted_epoch:
                continue
            trial = read_json(path)
            if isinstance(trial, dict) and not trial.get("resumed"):
                trial["logs"] = {**(trial.get("logs") or {}), **slurm_logs}
                write_json_atomic(path, trial)
        except (OSError, ValueError) as error:
            log.warning(f"could not add the SLURM job to {path}: {error}")
    try:  # the in-allocation driver's progress lines
        for line in out.read_text(errors="replace").splitlines():
            if re.match(r"\[\d+/\d+\] ", line):
                print(line, flush=True)
    except OSError:
        pass
    if problem:
        print(f"ddpbench: error: {problem}; see {out} and {err}", file=sys.stderr, flush=True)
    return rc

