"""Bounded SLURM job-state queries that work without accounting (no slurmdbd, so no ``sacct``).

Without accounting, submitit's ``job.result()`` can wait forever for a job that died without writing its
result (scancel, OOM, time limit): its watcher asks ``sacct``, which fails. These helpers ask the controller
instead (``scontrol show job -o``), with a timeout on every call, so a caller can notice that a job has
ended and stop waiting.

The controller forgets a job ``MinJobAge`` seconds after it ends (300 s by default; the local test cluster
of ``scripts/slurm-local.sh`` uses 600 s). :func:`job_state` then returns ``None``; for a job id that was
submitted earlier this means "ended, state no longer known", which :func:`is_finished` treats as finished.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Mapping

__all__ = [
    "ACTIVE_STATES",
    "TERMINAL_STATES",
    "SlurmStateError",
    "QUEUED_STATES",
    "is_finished",
    "is_started",
    "is_terminal",
    "job_state",
    "job_states",
    "wait_finished",
]

#: Job states after which the job's processes are gone (or going) and no result will appear anymore.
TERMINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)
#: Job states of a job that is queued, running, or still cleaning up (COMPLETING: processes being killed).
ACTIVE_STATES = frozenset(
    {
        "COMPLETING",
        "CONFIGURING",
        "PENDING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "RUNNING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "SUSPENDED",
    }
)

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
