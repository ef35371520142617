"""Start node agents under a guard (:mod:`ddpbench.trial.guard`, each in a session of its own), wait for them with a
watchdog, and stop them completely. Waiting polls in the calling thread: the guard's parent-death signal fires when
the thread that spawned it ends."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from ddpbench.formats.layout import AttemptLayout
from ddpbench.trial.guard import descendants

#: seconds the guard gets to clean up after SIGTERM before its session is SIGKILLed
GUARD_GRACE_S = 5.0


@dataclass
class AgentHandle:
    """One running node agent."""

    node_rank: int
    process: subprocess.Popen
    record_path: Path
    stdout_path: Path
    stderr_path: Path
    spawn_epoch: float
    spawn_monotonic: float
    exit_monotonic: Optional[float] = None


@dataclass
class AgentResult:
    """How one node agent ended. Times in seconds; epochs are Unix time."""

    node_rank: int
    exit_code: Optional[int]
    wall_s: float
    spawn_epoch: float
    exit_epoch: float
    stdout_path: str
    stderr_path: str
    killed_by: Optional[str] = None
    # what every process below the agent's guard cost (the guard record's ``footprint``); None when it wrote none
    footprint: Optional[Dict[str, Any]] = None


@dataclass
class WaitOutcome:
    """Every agent's result and why waiting ended: ``exited``, ``timeout`` or ``peer_failed``."""

    results: List[AgentResult] = field(default_factory=list)
    reason: str = "exited"


def spawn_agent(node_rank: int, argv: Sequence[str], env: Dict[str, str], attempt: AttemptLayout) -> AgentHandle:
    """Start ``argv`` under a guard in the attempt's folder; its stdout/stderr go to the attempt's node logs."""
    attempt.logs.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = attempt.node_log(node_rank, "stdout"), attempt.node_log(node_rank, "stderr")
    record_path = attempt.guard_record(node_rank)
    record_path.unlink(missing_ok=True)
    guard = [sys.executable, "-m", "ddpbench.trial.guard", "--record", str(record_path),
             "--parent", str(os.getpid()), "--", *argv]
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        spawn_epoch = time.time()
        spawn_monotonic = time.monotonic()
        process = subprocess.Popen(guard, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                   cwd=str(attempt.root), start_new_session=True)
    return AgentHandle(node_rank, process, record_path, stdout_path, stderr_path, spawn_epoch, spawn_monotonic)


def stop_agent(handle: AgentHandle) -> None:
    """Stop an agent and everything it started: SIGTERM to its guard, then SIGKILL the rest."""
    process = handle.process
    if process.poll() is None:
        with contextlib.suppress(subprocess.TimeoutExpired, ProcessLookupError):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=GUARD_GRACE_S)
    for pid in descendants(process.pid) if process.poll() is None else []:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=GUARD_GRACE_S)
    if handle.exit_monotonic is None:
        handle.exit_monotonic = time.monotonic()


def _result(handle: AgentHandle, killed_by: Optional[str]) -> AgentResult:
    exit_monotonic = handle.exit_monotonic or time.monotonic()
    record: dict = {}
    with contextlib.suppress(OSError, ValueError):
        record = json.loads(handle.record_path.read_text())
    own = killed_by is None  # a stopped agent's code and wall are not its command's
    recorded_code = record.get("exit_code")
    return AgentResult(
        node_rank=handle.node_rank,
        exit_code=(handle.process.returncode if recorded_code is None else recorded_code) if own else None,
        wall_s=float(record["wall_s"]) if "wall_s" in record and own else exit_monotonic - handle.spawn_monotonic,
        spawn_epoch=float(record.get("spawn_epoch", handle.spawn_epoch)),
        exit_epoch=float(record.get("exit_epoch", handle.spawn_epoch + exit_monotonic - handle.spawn_monotonic)),
        stdout_path=str(handle.stdout_path), stderr_path=str(handle.stderr_path), killed_by=killed_by,
        footprint=record.get("footprint") if isinstance(record.get("footprint"), dict) else None,
    )


def wait_agents(handles: Sequence[AgentHandle], deadline_monotonic: float, peer_grace_s: float = 15.0,
                on_tick: Optional[Callable[[], None]] = None) -> WaitOutcome:
    """Wait for every agent until ``deadline_monotonic`` (then stop the rest: ``timeout``); once one fails, the others
    get ``peer_grace_s`` to end on their own (then ``peer_failed``). Any exception stops every agent and propagates.
    ``on_tick`` (live progress) runs every poll."""
    failed_at: Optional[float] = None
    reason = "exited"
    killed: Dict[int, str] = {}
    try:
        while True:
            now = time.monotonic()
            running = []
            for handle in handles:
                code = handle.process.poll()
                if code is None:
                    running.append(handle)
                    continue
                if handle.exit_monotonic is None:
                    handle.exit_monotonic = now
                if code != 0 and failed_at is None:
                    failed_at = now
            if not running:
                break
            if now >= deadline_monotonic or (failed_at is not None and now - failed_at >= peer_grace_s):
                reason = "timeout" if now >= deadline_monotonic else "peer_failed"
                for handle in running:
                    stop_agent(handle)
                    killed[handle.node_rank] = reason
                break
            if on_tick is not None:
                on_tick()
            time.sleep(0.05)
    except BaseException:
        for handle in handles:
            stop_agent(handle)
        raise
    return WaitOutcome([_result(h, killed.get(h.node_rank)) for h in handles], reason)


def tail(path: str | os.PathLike[str], lines: int = 20) -> str:
    """The last ``lines`` lines of a text file ('' when unreadable)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 16384))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
