"""Atomic file writes for every result file ddpbench produces, and where relative paths a user gives resolve."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator

from ddpbench.errors import StorageError

#: what to add to the system's reason for errors a user fixes on the storage side
_HINTS = {
    errno.ENOSPC: "the disk is full: free space, then resume the sweep with the same sweep_name",
    errno.EDQUOT: "the disk quota is used up: free space, then resume the sweep with the same sweep_name",
    errno.EROFS: "the file system is mounted read-only",
    errno.EFBIG: "the file-size limit (ulimit -f) is too small",
}


def storage_error(path: str | os.PathLike[str], error: OSError) -> StorageError:
    """``error`` (raised writing ``path``) as a one-line :class:`StorageError` naming the file and the cause."""
    reason = error.strerror or str(error)
    hint = _HINTS.get(error.errno or 0)
    failure = StorageError(f"cannot write {path}: {reason}" + (f" ({hint})" if hint else ""))
    failure.errno = error.errno
    return failure


#: the name :func:`atomic_path` gives its temporary file: ``.<target name>.<random>.tmp`` (tempfile.mkstemp)
_TEMPORARY = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]+\.tmp$")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block ends without error, fsync it and rename it over ``path``
    (readers see the old file or the whole new one). The one atomic write of every result file; an OSError becomes a
    one-line :class:`StorageError`."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp_name, 0o666 & ~mask)  # as open() makes it: mkstemp's 0600 would keep a report from its readers
    except OSError as error:
        raise storage_error(target, error) from None
    try:
        yield Path(tmp_name)
        with open(tmp_name, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(error, OSError) and not isinstance(error, StorageError):
            raise storage_error(target, error) from None
        raise


def unfinished_writes(folder: str | os.PathLike[str]) -> Dict[Path, str]:
    """The temporary files a writer killed mid-write left in ``folder``, each with the name of the file it wrote."""
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    found = {Path(folder) / name: _TEMPORARY.match(name) for name in names}
    return {path: match.group("target") for path, match in found.items() if match is not None}


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json_atomic(path: str | os.PathLike[str], payload: Any) -> Path:
    """Write ``payload`` as indented JSON to ``path`` atomically (see :func:`write_text_atomic`)."""
    return write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read one JSON document."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def writable_dir_problem(path: str | os.PathLike[str]) -> str | None:
    """Create ``path`` if needed and try writing in it; return why that failed, or None when it works."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".ddpbench-write-test-{socket.gethostname()}-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        return error.strerror or str(error)
    return None


def launch_dir() -> Path:
    """The directory ddpbench was run from (Hydra's ``runtime.cwd``, else the cwd): a user's relative paths resolve
    against it."""
    from hydra.core.hydra_config import HydraConfig

    return Path(str(HydraConfig.get().runtime.cwd)) if HydraConfig.initialized() else Path.cwd()
