"""The job's host-sync pattern (``--host-sync``, config ``workload.host_sync``): what a training step makes the host
wait for on the device, as the job being measured does it.

Named patterns (:data:`ddpbench.formats.rank_loop.HOST_SYNCS`):

- ``none``: ddpbench's own loop, free of synchronisation inside the timed loop: the host runs ahead of the GPU
  as far as the launch queue lets it, and the batch is copied to the device before the tool's step marker.
- ``loss``: as ``none``, and the loss is read to the host after every step (``float(loss.detach())``, what a loop
  that logs or accumulates its loss does): one synchronisation at the end of each step.
- ``seed``: the seed script's loop (TraceML's ``benchmarking/wallclock_overhead/ddp_mlp_e2e.py``):
  ``torch.cuda.synchronize()`` before every step (its stop check, after the batch is fetched), the host-to-device
  copy inside the step marker (``trace_step``), and the loss read after every step, outside the marker.
  ddpbench's lockstep stop stays (the seed's per-rank clock check can hang a multi-rank job).
- ``own``: a framework Trainer's or a user script's own loop; ddpbench adds nothing (not a harness pattern).

On CPU the synchronisations do nothing; the loss read still happens (a Python float from a tensor).
"""

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
