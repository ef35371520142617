"""The one bounded wait for a SLURM job, used by both submission styles (one job per trial, one allocation).

A submitted job is polled every ``poll_s`` seconds through the controller (``scontrol``, each call bounded by
:data:`SLURM_CALL_TIMEOUT_S`, see :mod:`ddpbench.cluster.slurm_state`), never through ``sacct``:

- it may stay queued (:data:`~ddpbench.cluster.slurm_state.QUEUED_STATES`) at most ``queue_timeout_s``;
- once started, at most its time limit + :data:`PAST_LIMIT_S`; and never longer than queue timeout + limit +
  :data:`PAST_LIMIT_S` after submission, however the controller answers;
- past a deadline the job is cancelled (``scancel``) and the outcome names the problem;
- when the caller waits for a result file, a job that ended gets :data:`RESULT_GRACE_S` more for it to appear.

Any exception while waiting (Ctrl-C, SIGTERM) cancels the job before it propagates.
"""

from __future__ import annotations

import logging
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional

from ddpbench.cluster.slurm_state import SlurmStateError, is_started, is_terminal, job_state, wait_finished

log = logging.getLogger(__name__)

#: seconds allowed past the job's SLURM time limit before the submitter cancels it itself
PAST_LIMIT_S = 60.0
#: seconds to wait for a result file once the controller says the job ended
RESULT_GRACE_S = 5.0
#: seconds one scontrol / scancel / sbatch call may take
SLURM_CALL_TIMEOUT_S = 15.0
#: seconds to wait, after scancel, for the controller to report the job ended
CANCEL_WAIT_S = 30.0


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
