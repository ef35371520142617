"""Which config keys make a trial's condition: the one list the runner, the sweep and the record share.

A *condition* is what the trials of a pair share (the trial record's ``condition`` and
``condition_id``): every chosen or swept key except the ones below. The record's ``config_hash``
leaves out only :data:`SWEEPER_KEYS` (the hash of a trial written before must not change).
"""

from __future__ import annotations

from typing import Tuple

#: keys the sweep driver sets on every job itself: where the job sits in its sweep, not what it measures
SWEEPER_KEYS: Tuple[str, ...] = ("pair_position", "sweep_name")
#: keys that differ between the drivers of one multi-node trial (each node runs its own driver)
NODE_KEYS: Tuple[str, ...] = ("cluster.node_rank",)
#: keys that vary inside a condition: the arm compared and the pair's repeat
ARM_KEYS: Tuple[str, ...] = ("mode", "repeat")
#: keys that never name a trial's job folder (Hydra's ``override_dirname`` leaves them out)
NOT_IN_JOB_DIR: Tuple[str, ...] = SWEEPER_KEYS + NODE_KEYS
#: keys that are not part of a condition
NON_CONDITION_KEYS: Tuple[str, ...] = ARM_KEYS + NOT_IN_JOB_DIR


def override_key(override: str) -> str:
    """The key of a Hydra override ``key=value`` (without a leading ``+``, ``++`` or ``~``)."""
    return override.split("=", 1)[0].lstrip("+~")


def is_condition_override(override: str) -> bool:
    """Whether the override ``key=value`` is part of the job's condition."""
    return override_key(override) not in NON_CONDITION_KEYS
