"""The user's own training script (``workload=script``): whether the trial runs one, where it is, its arguments.

``workload.path`` names the script, relative to the directory ddpbench was run from; ``workload.args`` are its
own arguments (a list, or one string split as a shell would). What a script may do is checked with the rest of
the config (:mod:`ddpbench.trial.checks`).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import List

from ddpbench.config import DdpbenchConfig
from ddpbench.errors import ConfigError
from ddpbench.io import launch_dir


def is_user_script(cfg: DdpbenchConfig) -> bool:
    """Whether the workload is a user's own script (``workload.path`` set) rather than a built-in one."""
    return cfg.workload.path is not None


def script_args(cfg: DdpbenchConfig) -> List[str]:
    """``workload.args`` as an argv list: a list as it is, one string split as a shell would (shlex)."""
    args = cfg.workload.args
    if args is None:
        return []
    if isinstance(args, str):
        try:
            return shlex.split(args)
        except ValueError as error:
            raise ConfigError(f"workload.args={args!r}: cannot be split as a shell would: {error}") from None
    return [str(arg) for arg in args]


def script_file(cfg: DdpbenchConfig) -> Path:
    """The absolute path of the user's script: ``workload.path`` resolved against :func:`ddpbench.io.launch_dir`."""
    return (launch_dir() / os.path.expanduser(cfg.workload.path or "")).resolve()
