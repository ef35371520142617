"""Process-wide outcome of a ddpbench run: how many trials did not succeed (sets the exit code)."""

from __future__ import annotations

_failures = 0


def reset() -> None:
    """Start counting afresh."""
    global _failures
    _failures = 0


def record_failure(count: int = 1) -> None:
    """Count ``count`` trials that did not end ok."""
    global _failures
    _failures += count


def failures() -> int:
    """Trials that did not end ok in this process."""
    return _failures
