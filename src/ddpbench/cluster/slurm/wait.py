"""Waiting on a SLURM job, every wait bounded, through the controller: no accounting needed (no ``sacct``).

Without accounting, submitit's ``job.result()`` can wait forever for a job that died without writing its
result (scancel, OOM, time limit): its watcher asks ``sacct``, which fails. Here the job's state comes from
the controller (``scontrol show job -o``, each call bounded by :data:`SLURM_CALL_TIMEOUT_S`). The controller
forgets a job ``MinJobAge`` seconds after it ends (300 s by default; 600 s on the local test cluster of
``scripts/slurm-local.sh``): :func:`job_state` then returns ``None``, which for a job submitted earlier means
"ended, state no longer known".

:func:`await_job`, used by both submission styles (one job per trial, one allocation), polls every
``poll_s`` seconds:

- the job may stay queued (:data:`QUEUED_STATES`) at most ``queue_timeout_s``;
- once started, at most its time limit + :data:`PAST_LIMIT_S`; and never longer than queue timeout + limit +
  :data:`PAST_LIMIT_S` after submission, however the controller answers;
- past a deadline the job is cancelled (``scancel``) and the outcome names the problem;
- when the caller waits for a result file, a job that ended gets :data:`RESULT_GRACE_S` more for it to appear.

Any exception while waiting (Ctrl-C, SIGTERM) cancels the job before it propagates.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional

log = logging.getLogger(__name__)

#: seconds allowed past the job's SLURM time limit before the submitter cancels it itself
PAST_LIMIT_S = 60.0
#: seconds to wait for a result file once the controller says the job ended
RESULT_GRACE_S = 5.0
#: seconds one scontrol / scancel / sbatch call may take
SLURM_CALL_TIMEOUT_S = 15.0
#: seconds to wait, after scancel, for the controller to report the job ended
CANCEL_WAIT_S = 30.0

#: Job states after which the job's processes are gone (or going) and no result will appear anymore.
TERMINAL_STATES = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                             "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT"})
#: Job states of a job that has not started yet: the time limit and the running deadline count from the
#: first state outside this set (CONFIGURING included: the nodes are allocated, SLURM's clock runs).
QUEUED_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD"})

_JOB_ID = re.compile(r"^\d+(_\d+)?(\.\w+)?$")
_FIELD = re.compile(r"(?:^|\s)(JobId|ArrayJobId|ArrayTaskId|JobState)=(\S*)")


class SlurmStateError(RuntimeError):
    """``scontrol`` could not answer (missing, timed out, controller unreachable, unexpected output)."""


def _records(stdout: str) -> list[dict[str, str]]:
    records = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        fields = dict(_FIELD.findall(line))
        if "JobState" in fields:
            records.append(fields)
    return records


def job_states(
    job_id: str | int, *, timeout: float = 10.0, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """All records ``scontrol show job -o JOB_ID`` knows, as ``{record id: JobState}``.

    A record id is ``"<ArrayJobId>_<ArrayTaskId>"`` for array tasks, else the ``JobId``. Empty when the
    controller does not know the job (never existed, or ended more than ``MinJobAge`` seconds ago).
    Raises :class:`SlurmStateError` when ``scontrol`` fails otherwise or takes longer than ``timeout``.
    ``env``: the environment for ``scontrol`` (e.g. one holding ``SLURM_CONF``); default: inherited.
    """
    jid = str(job_id).strip()
    if not _JOB_ID.match(jid):
        raise ValueError(f"not a SLURM job id: {job_id!r}")
    try:
        proc = subprocess.run(
            ["scontrol", "show", "job", "-o", jid],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except FileNotFoundError as exc:
        raise SlurmStateError("scontrol not found on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise SlurmStateError(f"scontrol show job {jid} took longer than {timeout:g} s") from exc
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return {}
        msg = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise SlurmStateError(f"scontrol show job {jid} failed (rc {proc.returncode}): {msg}")
    out: dict[str, str] = {}
    for rec in _records(proc.stdout):
        array_job, task = rec.get("ArrayJobId"), rec.get("ArrayTaskId")
        key = f"{array_job}_{task}" if array_job and task and task != "(null)" else rec.get("JobId", jid)
        out[key] = rec["JobState"]
    return out


def _aggregate(states: list[str]) -> str:
    """One state for several records (an array): active if any is active, else the first non-COMPLETED."""
    for s in states:
        if s not in TERMINAL_STATES:
            return s
    for s in states:
        if s != "COMPLETED":
            return s
    return states[0]


def job_state(
    job_id: str | int, *, timeout: float = 10.0, env: Mapping[str, str] | None = None
) -> str | None:
    """The controller's ``JobState`` of ``job_id`` (e.g. ``"RUNNING"``, ``"CANCELLED"``), or ``None`` if unknown.

    ``job_id`` may be ``"123"`` or an array task ``"123_4"``. For a whole array (several records) the
    result is active while any task is active, else the first state that is not COMPLETED.
    Bounded by ``timeout`` seconds; raises :class:`SlurmStateError` when ``scontrol`` cannot answer.
    """
    states = job_states(job_id, timeout=timeout, env=env)
    if not states:
        return None
    jid = str(job_id).strip()
    if jid in states:
        return states[jid]
    return _aggregate(list(states.values()))


def is_terminal(state: str | None) -> bool:
    """True for an ended job: a state in :data:`TERMINAL_STATES`, or ``None`` (forgotten by the controller)."""
    if state is None:
        return True
    return state.split()[0].rstrip("+") in TERMINAL_STATES


def is_started(state: str | None) -> bool:
    """True once a job has left the queue: running, cleaning up, or ended (``None``: forgotten, so ended)."""
    if state is None:
        return True
    return state.split()[0].rstrip("+") not in QUEUED_STATES


def is_finished(job_id: str | int, *, timeout: float = 10.0, env: Mapping[str, str] | None = None) -> bool:
    """True when a job submitted earlier has ended (terminal state, or no longer known to the controller)."""
    return is_terminal(job_state(job_id, timeout=timeout, env=env))


def wait_finished(
    job_id: str | int,
    timeout: float,
    *,
    poll: float = 0.5,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """Poll until ``job_id`` has ended; return its final state (``None``: forgotten). Bounded by ``timeout``.

    Raises :class:`TimeoutError` when the job is still active after ``timeout`` seconds. A transient
    :class:`SlurmStateError` is retried until the deadline, then re-raised.
    """
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            state = job_state(job_id, timeout=max(1.0, min(10.0, left)), env=env)
        except SlurmStateError:
            if time.monotonic() >= deadline:
                raise
        else:
            if is_terminal(state):
                return state
            if time.monotonic() >= deadline:
                raise TimeoutError(f"SLURM job {job_id} still {state} after {timeout:g} s")
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))


@dataclass(frozen=True)
class Bounds:
    """The submitter's limits (``hydra.launcher.*``, filled from ``cluster.slurm.*``)."""

    # seconds a job may stay queued before it is cancelled
    queue_timeout_s: float = 3600.0
    # seconds added to the trial timeout for SLURM's --time (the in-job watchdog fires first)
    wait_margin_s: float = 120.0
    # seconds between two checks of a job
    poll_s: float = 1.0

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "Bounds":
        """From the launcher's keys; missing ones take the defaults; ``poll_s`` is at least 0.1 s."""
        defaults = cls()
        return cls(
            queue_timeout_s=float(params.get("queue_timeout_s", defaults.queue_timeout_s)),
            wait_margin_s=float(params.get("wait_margin_s", defaults.wait_margin_s)),
            poll_s=max(0.1, float(params.get("poll_s", defaults.poll_s))),
        )


@dataclass
class JobWait:
    """How a bounded wait ended."""

    # the controller's last known state (None: forgotten, i.e. ended)
    state: Optional[str] = "PENDING"
    # monotonic time the job was first seen started, None if never
    started: Optional[float] = None
    # True when the caller's result appeared
    has_result: bool = False
    # set when a deadline passed and the job was cancelled: one line saying which
    problem: Optional[str] = None
    # controller errors met on the way (the wait went on)
    notes: List[str] = field(default_factory=list)


def scancel(job_id: str) -> None:
    """Cancel a job; a failure is logged, never raised."""
    try:
        subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=SLURM_CALL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        log.warning(f"scancel {job_id} failed: {error}")


def await_job(job_id: str, *, bounds: Bounds, limit_s: float, submitted: float,
              has_result: Optional[Callable[[], bool]] = None) -> JobWait:
    """Wait, bounded, until job ``job_id`` has a result (``has_result``) or has ended, or cancel it.

    ``limit_s``: the job's SLURM time limit in seconds; ``submitted``: ``time.monotonic()`` at submission.
    """
    outcome = JobWait()
    queue_deadline = submitted + bounds.queue_timeout_s
    hard_deadline = queue_deadline + limit_s + PAST_LIMIT_S
    ended_at: Optional[float] = None
    try:
        while True:
            now = time.monotonic()
            if has_result is not None and has_result():
                outcome.has_result = True
                break
            try:
                outcome.state = job_state(job_id, timeout=SLURM_CALL_TIMEOUT_S)
            except SlurmStateError as error:
                outcome.notes.append(str(error))
            else:
                if outcome.started is None and is_started(outcome.state):
                    outcome.started = now
                if is_terminal(outcome.state):
                    ended_at = ended_at if ended_at is not None else now
                    if has_result is None or now - ended_at >= RESULT_GRACE_S:
                        break
                    time.sleep(min(0.5, bounds.poll_s))
                    continue
            if outcome.started is None and now >= queue_deadline:
                outcome.problem = (f"SLURM job {job_id} did not start within {bounds.queue_timeout_s:.0f} s "
                                   f"(state {outcome.state}); cancelled")
            elif now >= hard_deadline or (outcome.started is not None
                                          and now >= outcome.started + limit_s + PAST_LIMIT_S):
                outcome.problem = (f"SLURM job {job_id} still {outcome.state} {limit_s + PAST_LIMIT_S:.0f} s after "
                                   "it started; cancelled")
            if outcome.problem:
                cancel_and_wait(job_id, outcome)
                break
            time.sleep(bounds.poll_s)
    except BaseException:
        scancel(job_id)
        raise
    return outcome


def cancel_and_wait(job_id: str, outcome: JobWait) -> None:
    """scancel ``job_id`` and wait (bounded) until the controller reports it ended; update ``outcome.state``."""
    scancel(job_id)
    try:
        outcome.state = wait_finished(job_id, timeout=CANCEL_WAIT_S, poll=0.5)
    except (TimeoutError, SlurmStateError) as problem:
        outcome.notes.append(str(problem))
        if outcome.problem:
            outcome.problem += f" ({problem})"
