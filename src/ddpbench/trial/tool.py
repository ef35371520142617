"""What a mode's tool needs before anything launches: its Python module or its executable (else one line naming
the package to install: :class:`~ddpbench.errors.ToolMissingError`)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from typing import Optional

from ddpbench.config import DdpbenchConfig
from ddpbench.errors import ToolMissingError
from ddpbench.versions.arm import Arm, check_flags


def module_found(name: str) -> bool:
    """Whether Python module ``name`` can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def find_executable(name: str) -> Optional[str]:
    """The full path of executable ``name`` on PATH, else in this Python's scripts folder (a venv used without
    activating it), or None."""
    dirs = [*os.environ.get("PATH", os.defpath).split(os.pathsep), sysconfig.get_path("scripts"),
            os.path.dirname(sys.executable)]
    return shutil.which(name, path=os.pathsep.join(dict.fromkeys(d for d in dirs if d)))


def check_tool(cfg: DdpbenchConfig, arm: Arm) -> None:
    """Raise ToolMissingError when the mode's Python module or executable is missing; an arm at its own version
    checks instead that its launcher has every flag the command passes (ConfigError)."""
    mode = cfg.mode
    if arm.env is not None:  # an arm at its own version: its environment holds the tool
        check_flags(mode, arm.env)
        return
    module, program = mode.requires, mode.requires_executable
    if module and not module_found(str(module)):
        package = mode.requires_package or module
        raise ToolMissingError(
            f"mode={mode.name} needs the Python package '{package}' (module {module}), which is not "
            f"installed: pip install {package}"
        )
    if program and find_executable(str(program)) is None:
        package = mode.requires_package or program
        raise ToolMissingError(
            f"mode={mode.name} needs the executable '{program}' (package '{package}'), which is not on PATH "
            f"nor beside {sys.executable}: pip install {package}"
        )
