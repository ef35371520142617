"""The job's host-sync pattern (``--host-sync``): what a training step makes the host wait for on the device
(``none``, ``loss``, ``seed``: :data:`~ddpbench.formats.rank_loop.HARNESS_HOST_SYNCS`; docs/workload.md)."""

from __future__ import annotations

from typing import Any, Callable

from ddpbench.formats.rank_loop import HARNESS_HOST_SYNCS


class HostSync:
    """One rank's host-sync pattern: the hooks the step calls before its device work and after it."""

    def __init__(self, pattern: str, synchronize: Callable[[], None]) -> None:
        if pattern not in HARNESS_HOST_SYNCS:
            raise ValueError(f"host sync {pattern!r} is not one of {', '.join(HARNESS_HOST_SYNCS)}")
        # the pattern's name
        self.pattern = pattern
        # the device synchronize of this rank (nothing on CPU)
        self._synchronize = synchronize
        # synchronize before each step
        self.sync_before = pattern == "seed"
        # the host-to-device copy runs inside the step marker
        self.copy_inside_marker = pattern == "seed"
        # read the loss to the host after each step
        self.read_loss = pattern in ("loss", "seed")
        # the last loss read (a Python float), NaN before the first
        self.last_loss = float("nan")

    def before_step(self) -> None:
        """Before the step's device work, after its batch was fetched."""
        if self.sync_before:
            self._synchronize()

    def after_step(self, loss: Any) -> None:
        """After the step (outside the step marker): read its loss when the pattern does."""
        if self.read_loss:
            self.last_loss = float(loss.detach())
