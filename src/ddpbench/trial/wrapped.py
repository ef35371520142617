"""The exit status of a mode's command under its ``wrapper`` (``py-spy record`` exits 0 whatever its child did):
it runs as ``WRAPPER /bin/sh -c SCRIPT sh COMMAND...``, and the shell (no Python process for a sampler, about a
millisecond to start) writes the command's exit status into the attempt's ``command_status`` file."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Optional


def recording_prefix(status_file: Path) -> List[str]:
    """argv between a wrapper and its command: the shell that records the command's status in ``status_file``."""
    target = shlex.quote(str(status_file))
    return ["/bin/sh", "-c", f'"$@"; status=$?; echo "$status" > {target}; exit "$status"', "sh"]


def exit_code(agent_code: Optional[int], status_file: Path) -> Optional[int]:
    """A node's exit code: its agent's, unless that is 0 and the wrapped command recorded a non-zero one."""
    if agent_code != 0:
        return agent_code
    try:
        return int(status_file.read_text().strip())
    except (OSError, ValueError):
        return 0
