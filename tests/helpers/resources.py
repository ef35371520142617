"""One line for a shared resource that would not start (a SLURM or Ray cluster, a download of tool releases).

Every test that needs the resource fails with the same line: which resource, the command that was run, how it
ended, and the last line of the resource's newest log, so the cause is on the first error line of the run.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import NoReturn, Sequence

import pytest


def last_line(text: str) -> str:
    """The last non-blank line of ``text``, or ``(no output)``."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def newest_log_line(logs: Sequence[Path]) -> str:
    """``<file>: <its last line>`` for the newest non-empty log among ``logs`` (files, and the files of
    folders), or an empty string when there is none."""
    files = [child for path in logs for child in (sorted(path.iterdir()) if path.is_dir() else [path])
             if child.is_file() and child.stat().st_size]
    if not files:
        return ""
    newest = max(files, key=lambda path: path.stat().st_mtime)
    return f"{newest}: {last_line(newest.read_text(errors='replace'))}"


def resource_failed(resource: str, command: Sequence[str], outcome: str, logs: Sequence[Path] = ()) -> NoReturn:
    """Fail the test (an error in a fixture) with one line naming ``resource``, ``command``, its ``outcome``
    and the newest line of its ``logs``."""
    log = newest_log_line(logs)
    pytest.fail(f"{resource} did not start: `{shlex.join(command)}` {outcome}"
                + (f"; last log line: {log}" if log else ""), pytrace=False)
