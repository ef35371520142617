"""Errors that reach the user as one line and a non-zero exit, never as a traceback.

:func:`error_line` prints it for every ddpbench command; :func:`fail` prints it and ends the process.
"""

import sys
from typing import NoReturn

#: the program name most errors carry: the Hydra app, and the processes it starts
PROG = "ddpbench"


def error_line(message: str, code: int = 2, prog: str = PROG) -> int:
    """Print ``prog: error: message`` (one line) on stderr; return ``code``, the exit status that goes with it."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr, flush=True)
    return code


def fail(message: str, code: int = 2, prog: str = PROG) -> NoReturn:
    """End the process as every ddpbench error does: :func:`error_line`, then exit status ``code``."""
    raise SystemExit(error_line(message, code, prog))


class DdpbenchError(Exception):
    """Base of every error ddpbench reports as one line."""


class ConfigError(DdpbenchError):
    """A composed config breaks a rule: the message names the key, the value and the rule."""


class ToolMissingError(DdpbenchError):
    """A mode needs a Python package that is not importable."""


class StorageError(DdpbenchError, OSError):
    """A result file could not be written (disk full, read-only file system, quota): the message names the file."""
