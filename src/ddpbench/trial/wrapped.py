"""The exit status of a mode's command under its ``wrapper``: ``py-spy record`` exits 0 whatever its child did.

A mode with a ``wrapper`` runs ``WRAPPER /bin/sh -c SCRIPT sh COMMAND...``: the POSIX shell runs the
command, writes its exit status (128 + N when signal N ended it) into ``logs/.node<r>.command-status`` of
the attempt, and exits with it. Once the agents have ended, an agent that exited 0 while its command did
not takes the command's status (:func:`exit_code`). The shell is no Python process for a sampler to profile,
and its start-up (about a millisecond) is the only cost it adds to the mode.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Optional, Union

#: the shell that runs a wrapped command and records its exit status
SHELL = "/bin/sh"


def status_path(logs_dir: Union[str, Path], node_rank: Union[int, str]) -> Path:
    """Where the shell records node ``node_rank``'s command exit status (``logs_dir``: the attempt's ``logs``)."""
    return Path(logs_dir) / f".node{node_rank}.command-status"


def recording_prefix(logs_dir: Union[str, Path], node_rank: Union[int, str]) -> List[str]:
    """argv tokens between a wrapper and the command it runs: the shell that records the command's exit status."""
    target = shlex.quote(str(status_path(logs_dir, node_rank)))
    return [SHELL, "-c", f'"$@"; status=$?; echo "$status" > {target}; exit "$status"', "sh"]


def exit_code(agent_code: Optional[int], logs_dir: Union[str, Path], node_rank: int) -> Optional[int]:
    """Node ``node_rank``'s exit code: the agent's, unless it is 0 and the wrapped command recorded a non-zero status."""
    if agent_code != 0:
        return agent_code
    try:
        recorded = int(status_path(logs_dir, node_rank).read_text().strip())
    except (OSError, ValueError):
        return agent_code
    return recorded if recorded != 0 else agent_code
