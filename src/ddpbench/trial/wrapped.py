"""The exit status of a mode's command under its ``wrapper``: ``py-spy record`` exits 0 whatever its child did.

A mode with a ``wrapper`` runs ``WRAPPER /bin/sh -c SCRIPT sh COMMAND...``: the POSIX shell runs the
command, writes its exit status (128 + N when signal N ended it) into the attempt's
``AttemptLayout.command_status`` file, and exits with it. Once the agents have ended, an agent that exited 0 while its command did
not takes the command's status (:func:`exit_code`). The shell is no Python process for a sampler to profile,
and its start-up (about a millisecond) is the only cost it adds to the mode.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Optional

#: the shell that runs a wrapped command and records its exit status
SHELL = "/bin/sh"


def recording_prefix(status_file: Path) -> List[str]:
    """argv tokens between a wrapper and the command it runs: the shell that records the command's exit status
    in ``status_file``."""
    target = shlex.quote(str(status_file))
    return [SHELL, "-c", f'"$@"; status=$?; echo "$status" > {target}; exit "$status"', "sh"]


def exit_code(agent_code: Optional[int], status_file: Path) -> Optional[int]:
    """A node's exit code: its agent's, unless it is 0 and the wrapped command recorded a non-zero status in
    ``status_file``."""
    if agent_code != 0:
        return agent_code
    try:
        recorded = int(status_file.read_text().strip())
    except (OSError, ValueError):
        return agent_code
    return recorded if recorded != 0 else agent_code
