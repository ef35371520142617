"""One driver per sweep dir (per node rank): an exclusive ``flock`` on a lock file there, held for the driver's life.

The kernel drops the lock when the driver ends in any way, so a stale lock file never blocks a resume. A second
driver stops with one line naming the holder (host, pid, start time), which the holder writes into the file.
A driver given the holder's token (:data:`TOKEN_ENV`, e.g. SLURM ``one_allocation``'s job) runs as its delegate.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import secrets
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List, Optional

from ddpbench.errors import DdpbenchError
from ddpbench.io import storage_error

#: environment variable carrying the holder's token to the drivers it delegates the sweep to
TOKEN_ENV = "DDPBENCH_SWEEP_LOCK"
#: seconds a second driver waits for a fresh holder to finish writing who it is
HOLDER_READ_WAIT_S = 1.0


class SweepLockedError(DdpbenchError):
    """Another live driver holds the sweep dir's lock; the message names it."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a sweep lock: written into the lock file by the holder, read by the driver it turns away."""

    # host name of the holding driver
    host: str
    # process id of the holding driver (on ``host``)
    pid: int
    # when it took the lock, ISO-8601 UTC
    started_at: str
    # random token identifying this hold (passed to delegate drivers through TOKEN_ENV)
    token: str


def lock_path(sweep_dir: Path, node_rank: int) -> Path:
    """The lock file of this driver's share of ``sweep_dir``: one per node rank (``cluster.node_rank``)."""
    return Path(sweep_dir) / f".ddpbench-lock.node{node_rank}"


class SweepLock:
    """An exclusive lock on one lock file; :meth:`acquire` it, :meth:`release` it or let the process end."""

    def __init__(self, path: Path) -> None:
        # the lock file (kept after release: the next holder locks the same inode)
        self.path = Path(path)
        # who holds it (this driver, or the driver this one runs for), once acquired
        self.holder: Optional[LockHolder] = None
        # whether this driver runs for a holder that passed it the token (no lock of its own)
        self.delegated = False
        self._fd: Optional[int] = None

    def acquire(self) -> "SweepLock":
        """Take the lock without waiting; SweepLockedError when a live driver holds it, StorageError when unwritable."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise storage_error(self.path, error) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise storage_error(self.path, error) from None
            return self._join_or_refuse()
        self._fd = fd
        self.holder = LockHolder(socket.gethostname(), os.getpid(),
                                 dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), secrets.token_hex(8))
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(asdict(self.holder)) + "\n").encode(), 0)
        except OSError as error:
            self.release()
            raise storage_error(self.path, error) from None
        os.environ[TOKEN_ENV] = self.holder.token
        return self

    def _join_or_refuse(self) -> "SweepLock":
        holder = self._read_holder()
        if holder is not None and holder.token == os.environ.get(TOKEN_ENV):
            self.holder, self.delegated = holder, True
            return self
        who = f"host {holder.host}, pid {holder.pid}, since {holder.started_at}" if holder else "holder unknown"
        raise SweepLockedError(
            f"another driver is running this sweep ({who}; lock {self.path}): wait for it to end or stop it, "
            "then resume with the same sweep_name"
        )

    def _read_holder(self) -> Optional[LockHolder]:
        deadline = time.monotonic() + HOLDER_READ_WAIT_S
        while True:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                return LockHolder(str(data["host"]), int(data["pid"]), str(data["started_at"]), str(data["token"]))
            except (OSError, ValueError, KeyError, TypeError):
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.05)

    def release(self) -> None:
        """Drop the lock (the process's end does the same)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "SweepLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def live_holder_refusal(sweep_dir: Path, node_rank: int) -> Optional[SweepLockedError]:
    """The error :func:`hold_sweep_lock` would raise because a live driver holds the lock; None when none does.

    Looks without taking the lock or creating its file (for a driver that failed before taking it).
    """
    path = lock_path(Path(sweep_dir), node_rank)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # a stale lock file: its holder is gone
    except OSError as error:
        if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
    finally:
        os.close(fd)
    try:
        SweepLock(path)._join_or_refuse()
    except SweepLockedError as refused:
        return refused
    return None  # held by the driver this one runs for


#: the locks this process holds until it ends (a lock lives as long as its open file)
_HELD: List[SweepLock] = []


def hold_sweep_lock(sweep_dir: Path, node_rank: int) -> SweepLock:
    """Take this driver's lock on ``sweep_dir`` (created if missing) for the rest of the process.

    Raises SweepLockedError (one line naming the holder; exit code 2) when another live driver runs
    the same sweep, StorageError when the lock file cannot be written.
    """
    path = lock_path(Path(sweep_dir), node_rank)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise storage_error(path.parent, error) from None
    lock = SweepLock(path).acquire()
    _HELD.append(lock)
    return lock
