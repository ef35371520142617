"""Waiting on a SLURM job through the controller (``scontrol``; no ``sacct``), every wait bounded (docs/slurm.md).

The controller forgets a job ``MinJobAge`` seconds after it ends: :func:`job_state` is then ``None``, "ended, state no
longer known". :func:`await_job` cancels a job past a deadline, and on any exception before that propagates.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from dataclasses import asdict, dataclass, field
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


def job_state(job_id: str | int, *, timeout: float = 10.0, env: Mapping[str, str] | None = None) -> str | None:
    """The controller's ``JobState`` of ``job_id`` (``"123"`` or an array task ``"123_4"``), or ``None`` if unknown.

    For a whole array: active while any task is active, else the first state that is not COMPLETED. Bounded by
    ``timeout`` seconds; raises :class:`SlurmStateError` when ``scontrol`` cannot answer. ``env``: scontrol's
    environment (e.g. one holding ``SLURM_CONF``); default: inherited.
    """
    jid = str(job_id).strip()
    if not _JOB_ID.match(jid):
        raise ValueError(f"not a SLURM job id: {job_id!r}")
    try:
        proc = subprocess.run(["scontrol", "show", "job", "-o", jid], capture_output=True, text=True, timeout=timeout,
                              env=dict(env) if env is not None else None, check=False)
    except FileNotFoundError as exc:
        raise SlurmStateError("scontrol not found on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise SlurmStateError(f"scontrol show job {jid} took longer than {timeout:g} s") from exc
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return None
        msg = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise SlurmStateError(f"scontrol show job {jid} failed (rc {proc.returncode}): {msg}")
    states: dict[str, str] = {}  # record id ("<ArrayJobId>_<ArrayTaskId>" for array tasks, else JobId) -> JobState
    for rec in (dict(_FIELD.findall(line)) for line in proc.stdout.splitlines()):
        if "JobState" in rec:
            array_job, task = rec.get("ArrayJobId"), rec.get("ArrayTaskId")
            key = f"{array_job}_{task}" if array_job and task and task != "(null)" else rec.get("JobId", jid)
            states[key] = rec["JobState"]
    if not states or jid in states:
        return states.get(jid)
    active = [state for state in states.values() if state not in TERMINAL_STATES]
    unfinished = [state for state in states.values() if state != "COMPLETED"]
    return (active or unfinished or list(states.values()))[0]


def is_terminal(state: str | None) -> bool:
    """True for an ended job: a state in :data:`TERMINAL_STATES`, or ``None`` (forgotten by the controller)."""
    return state is None or state.split()[0].rstrip("+") in TERMINAL_STATES


def is_started(state: str | None) -> bool:
    """True once a job has left the queue: running, cleaning up, or ended (``None``: forgotten, so ended)."""
    return state is None or state.split()[0].rstrip("+") not in QUEUED_STATES


def wait_finished(job_id: str | int, timeout: float, *, poll: float = 0.5,
                  env: Mapping[str, str] | None = None) -> str | None:
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
        values = {name: float(params.get(name, default)) for name, default in asdict(cls()).items()}
        return cls(**{**values, "poll_s": max(0.1, values["poll_s"])})


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
