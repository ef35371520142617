"""Process helpers for tests that launch real multi-process runs (torchrun, traceml run).

Every launch goes through :func:`run_bounded`: the command starts in a new session,
its output goes to files (no pipe can fill and block it), the wait is bounded, and
on return the whole process tree is gone: the session's process group is killed
and every descendant ever seen is killed too. Descendants are tracked by polling
``psutil`` while the command runs, because TraceML starts its children with
``start_new_session`` (they leave our process group) and an orphaned grandchild is
re-parented away from our tree, so a single walk at the end could miss it.

Tests wait for events (a file, a line in a log) with :func:`wait_for` and its file and text
forms, always with a bound, never with a fixed sleep.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence, TypeVar

import psutil

ProcKey = tuple[int, float]
"""A process identity: (pid, create_time), robust against pid reuse."""

T = TypeVar("T")


def wait_for(predicate: Callable[[], Optional[T]], timeout_s: float, what: str, *,
             alive: Sequence[subprocess.Popen] = (), details: Callable[[], str] = lambda: "",
             poll_s: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy and return that.

    Fails naming ``what`` (plus ``details()``, e.g. a driver's log) after ``timeout_s`` seconds,
    or at once when one of the processes ``alive`` has ended first: the event can no longer come.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        found = predicate()
        if found:
            return found
        ended = [p for p in alive if p.poll() is not None]
        if ended:
            raise AssertionError(f"{ended[0].args!r} ended ({ended[0].returncode}) before {what}\n{details()}")
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s\n{details()}")
        time.sleep(poll_s)


def first_file(root: Path, pattern: str) -> Optional[Path]:
    """The first (sorted) path under ``root`` matching the glob ``pattern``, or None (a :func:`wait_for` predicate)."""
    found = sorted(root.glob(pattern))
    return found[0] if found else None


def wait_for_file(root: Path, pattern: str, timeout_s: float, *, alive: Sequence[subprocess.Popen] = (),
                  details: Callable[[], str] = lambda: "") -> Path:
    """The first path under ``root`` matching ``pattern``, once one exists (see :func:`wait_for`)."""
    return wait_for(lambda: first_file(root, pattern), timeout_s, f"{pattern} under {root}", alive=alive,
                    details=details)


def wait_for_text(path: Path, text: str, timeout_s: float, *, alive: Sequence[subprocess.Popen] = (),
                  details: Callable[[], str] = lambda: "") -> None:
    """Return once the file ``path`` exists and contains ``text`` (see :func:`wait_for`)."""
    wait_for(lambda: path.is_file() and text in path.read_text(errors="replace"), timeout_s,
             f"{text!r} in {path}", alive=alive, details=details)


@dataclass
class CompletedRun:
    """Outcome of :func:`run_bounded`.

    ``returncode`` is None when the wait timed out and the tree was killed;
    ``procs`` are the (pid, create_time) of every process of the run that was seen.
    """

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float
    procs: set[ProcKey] = field(default_factory=set)

    @property
    def output(self) -> str:
        """stdout and stderr together (for assertion messages)."""
        return f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports (held open together while picked, so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def child_env(extra: Mapping[str, str] | None = None, *, drop_prefixes: Sequence[str] = ("TRACEML_",)) -> dict[str, str]:
    """The current environment minus variables starting with ``drop_prefixes``, with
    ``OMP_NUM_THREADS=1`` and unbuffered Python, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(tuple(drop_prefixes))}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def _key(proc: psutil.Process) -> ProcKey | None:
    """(pid, create_time) of ``proc``, None if it is gone."""
    try:
        return (proc.pid, proc.create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def snapshot_tree(root_pid: int) -> set[ProcKey]:
    """The root and all its current descendants."""
    try:
        root = psutil.Process(root_pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return set()
    return {k for p in procs if (k := _key(p)) is not None}


def _alive(key: ProcKey) -> psutil.Process | None:
    """The live, non-zombie process with this identity, or None."""
    pid, created = key
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - created) > 0.01 or proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def kill_tree(keys: Iterable[ProcKey], *, pgid: int | None = None, wait_s: float = 5.0) -> None:
    """SIGKILL the process group ``pgid`` (if given), every process in ``keys`` and
    every descendant they still have; wait up to ``wait_s`` for them to go."""
    if pgid is not None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    targets: dict[int, psutil.Process] = {}
    for key in keys:
        proc = _alive(key)
        if proc is None:
            continue
        targets[proc.pid] = proc
        try:
            for child in proc.children(recursive=True):
                targets[child.pid] = child
        except psutil.NoSuchProcess:
            pass
    for proc in targets.values():
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(list(targets.values()), timeout=wait_s)


def leftover(keys: Iterable[ProcKey]) -> list[ProcKey]:
    """Those of ``keys`` that are still alive (zombies do not count)."""
    return [k for k in keys if _alive(k) is not None]


def assert_no_leftover(keys: Iterable[ProcKey], *, grace_s: float = 5.0) -> None:
    """Fail if any process of ``keys`` is still alive after ``grace_s`` seconds."""
    keys = set(keys)
    try:
        wait_for(lambda: not leftover(keys), grace_s, "the run's processes to end")
        return
    except AssertionError:
        alive = leftover(keys)
    details = []
    for key in alive:
        proc = _alive(key)
        try:
            details.append(f"{key[0]}: {' '.join(proc.cmdline()) if proc else '?'}")
        except psutil.Error:
            details.append(str(key[0]))
    assert not alive, "processes left behind:\n" + "\n".join(details)


def run_bounded(
    cmd: Sequence[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    *,
    poll_s: float = 0.1,
) -> CompletedRun:
    """Run ``cmd`` in a new session for at most ``timeout`` seconds, then kill its whole tree.

    Returns after every process of the run has been killed (or exited).
    ``timed_out`` is True (and ``returncode`` None) when the bound was hit.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.monotonic()
        proc = subprocess.Popen(
            list(cmd), stdout=out, stderr=err, env=dict(env) if env is not None else None,
            cwd=cwd, start_new_session=True,
        )
        seen: set[ProcKey] = set()
        timed_out = False
        try:
            while proc.poll() is None:
                seen |= snapshot_tree(proc.pid)
                if time.monotonic() - start > timeout:
                    timed_out = True
                    break
                time.sleep(poll_s)
        finally:
            # Any descendant that outlived the root is re-parented: walk what we saw.
            kill_tree(seen, pgid=proc.pid)
            try:
                proc.kill()
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return CompletedRun(
            returncode=None if timed_out else proc.returncode,
            stdout=out.read(),
            stderr=err.read(),
            timed_out=timed_out,
            wall_s=wall,
            procs=seen,
        )
