"""A node's command run under ddpbench's guard (``python -m ddpbench.trial.guard``), stop signals forwarded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any, List


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
