"""A node's command run under ddpbench's guard (``python -m ddpbench.trial.guard``), stop signals forwarded; the
footprint its guard recorded."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import Any, Dict, List, Optional

from ddpbench.io import read_json


def exit_status(code: int) -> int:
    """A child's return code as an exit status (killed by signal N: ``128 + N``)."""
    return code if code >= 0 else 128 - code


def run_guarded(record: str, command: List[str], **popen: Any) -> int:
    """Run ``command`` under the guard (record at ``record``), SIGTERM/SIGINT forwarded; the guard's return code."""
    guard = subprocess.Popen([sys.executable, "-m", "ddpbench.trial.guard", "--record", record,
                              "--parent", str(os.getpid()), "--", *command], stdin=subprocess.DEVNULL, **popen)

    def forward(signum: int, _frame: object) -> None:
        if guard.poll() is None:
            guard.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    return guard.wait()


def guard_footprint(record: "str | os.PathLike[str]") -> Optional[Dict[str, Any]]:
    """The ``footprint`` a guard recorded at ``record`` (what every process below it cost), or None when it wrote
    none."""
    with contextlib.suppress(OSError, ValueError):
        footprint = read_json(record).get("footprint")
        return footprint if isinstance(footprint, dict) else None
    return None
