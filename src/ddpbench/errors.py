"""Errors that reach the user as one line and a non-zero exit, never as a traceback; :func:`fail` prints that line."""

import sys
from typing import NoReturn


def fail(message: str, code: int = 2) -> NoReturn:
    """End the process as every ddpbench error does: ``ddpbench: error: message`` on stderr, exit status ``code``."""
    print(f"ddpbench: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


class DdpbenchError(Exception):
    """Base of every error ddpbench reports as one line."""


class ConfigError(DdpbenchError):
    """A composed config breaks a rule: the message names the key, the value and the rule."""


class ToolMissingError(DdpbenchError):
    """A mode needs a Python package that is not importable."""


class StorageError(DdpbenchError, OSError):
    """A result file could not be written (disk full, read-only file system, quota): the message names the file."""
