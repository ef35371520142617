"""What a mode's tool needs before anything launches: its Python module or its executable.

A missing tool is a :class:`~ddpbench.errors.ToolMissingError` (one line naming the package to
install), raised before the first trial of a sweep starts.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from typing import List, Optional


from ddpbench.config import DdpbenchConfig
from ddpbench.errors import ToolMissingError
from ddpbench.versions.arm import Arm, check_flags


def executable_dirs() -> List[str]:
    """Where an executable is looked for: PATH, then the scripts folder of this Python's environment.

    The second covers a virtual environment used without activating it (``.venv/bin/python -m
    ddpbench``), where ``pip install py-spy`` put ``py-spy`` beside the interpreter.
    """
    dirs = [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d]
    for extra in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        if extra and extra not in dirs:
            dirs.append(extra)
    return dirs


def find_executable(name: str) -> Optional[str]:
    """The full path of executable ``name`` (see :func:`executable_dirs`), or None."""
    return shutil.which(name, path=os.pathsep.join(executable_dirs()))


def check_tool(cfg: DdpbenchConfig, arm: Arm) -> None:
    """Raise ToolMissingError when the mode's Python module or executable is missing.

    An arm of a version comparison (``version`` set) checks its own environment instead: its launcher has every
    flag the command passes (ConfigError naming the flag and the version).
    """
    mode = cfg.mode
    if arm.env is not None:  # an arm at its own version: its environment holds the tool
        check_flags(mode, arm.env)
        return
    package = mode.requires_package
    module = mode.requires
    if module and importlib.util.find_spec(str(module)) is None:
        package = package or module
        raise ToolMissingError(
            f"mode={mode.name} needs the Python package '{package}' (module {module}), which is not "
            f"installed: pip install {package}"
        )
    program = mode.requires_executable
    if program and find_executable(str(program)) is None:
        package = package or program
        raise ToolMissingError(
            f"mode={mode.name} needs the executable '{program}' (package '{package}'), which is not on PATH "
            f"nor beside {sys.executable}: pip install {package}"
        )
