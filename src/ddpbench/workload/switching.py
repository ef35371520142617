"""The timed loop's switch (``--switch-block-steps``): which timed steps run the tool's per-step work, by
:mod:`ddpbench.formats.switching`'s pure function of the step and the seed, so every rank switches on the same step
with no collective; what ``--switch`` turns off: docs/workload.md. Torch-free."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ddpbench.choices import SwitchWhat
from ddpbench.formats.switching import block_summaries, first_side, step_is_on
from ddpbench.workload.args import RankArgs

TRACEML_DISABLED_ENV = "TRACEML_DISABLED"
"""TraceML's kill switch, read on every call by its step capture and timed regions."""


@dataclasses.dataclass
class Switch:
    """One rank's switch: settings from the arguments (``--switch``, ``--switch-*``), the current side, and the
    record's ``switching``."""

    what: str
    block_steps: int
    washout_steps: int
    seed: int
    # whether the switchable work is on in the current step
    on: bool = True

    def __post_init__(self) -> None:
        # "on" or "off": the first block's side
        self.first = first_side(self.seed)
        # the environment's TRACEML_DISABLED before the loop (restored after it)
        self._env_before = os.environ.get(TRACEML_DISABLED_ENV)

    def last_of_block(self, step: int) -> bool:
        """Whether timed step ``step`` is the last of its block."""
        return step % self.block_steps == 0

    def enter(self, step: int) -> bool:
        """Set the side for timed step ``step`` (1-based); whether it runs the switchable work."""
        on = step_is_on(step, self.block_steps, self.first)
        if on != self.on and self.what == SwitchWhat.trace_step:
            if on:
                self._restore_env()
            else:
                os.environ[TRACEML_DISABLED_ENV] = "1"
        self.on = on
        return on

    def finish(self) -> None:
        """After the timed loop: everything back on (TraceML's teardown must see its kill switch as before)."""
        if self.what == SwitchWhat.trace_step:
            self._restore_env()
        self.on = True

    def _restore_env(self) -> None:
        if self._env_before is None:
            os.environ.pop(TRACEML_DISABLED_ENV, None)
        else:
            os.environ[TRACEML_DISABLED_ENV] = self._env_before

    def settings(self) -> dict[str, Any]:
        """The rank record's ``switching``."""
        return {"what": self.what, "block_steps": self.block_steps, "washout_steps": self.washout_steps,
                "first_side": self.first, "seed": self.seed}

    def blocks(self, durations_s: list[float]) -> list[dict[str, Any]]:
        """The rank record's ``blocks`` from the timed steps' durations (s)."""
        return block_summaries(durations_s, self.block_steps, self.washout_steps, self.first)


def switch_from_args(args: RankArgs[Any]) -> Switch | None:
    """The switch the arguments ask for, or None (``--switch-block-steps`` 0: no switching)."""
    if not args.switch_block_steps:
        return None
    return Switch(args.switch, args.switch_block_steps, args.switch_washout_steps, args.switch_seed)
