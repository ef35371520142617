"""A framework Trainer's process group, ended before the interpreter exits (as the harness ends its own): neither
Lightning under torchrun nor the HF Trainer destroys it, and freed at interpreter shutdown on gloo a rank can die
with SIGABRT after training (docs/workload.md)."""

from __future__ import annotations

import atexit
import datetime as dt
import gc
import sys

#: the longest a rank waits at exit for its peers to end training too, s; past it the rank ends its group alone
BARRIER_TIMEOUT_S = 60.0


def end_process_group_at_exit() -> None:
    """Arrange, once per process, for :func:`end_process_group` to run when the interpreter exits normally."""
    atexit.unregister(end_process_group)  # a second Trainer's end moves it, it does not add one
    atexit.register(end_process_group)


def end_process_group(timeout_s: float = BARRIER_TIMEOUT_S) -> None:
    """Free what still holds the default process group, wait for the peers (gloo: bounded) and destroy it, if it
    still exists; skipped after an uncaught exception (peers may be stuck in a collective). Failures: one line."""
    if getattr(sys, "last_value", None) is not None:
        return
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    try:
        gc.collect()  # DDP's reducer, no longer referenced, would otherwise outlive the group
        if dist.get_backend() == "gloo":
            dist.monitored_barrier(timeout=dt.timedelta(seconds=timeout_s))
        dist.destroy_process_group()
    except Exception as error:  # noqa: BLE001 - at exit, after training: say it and let the process end
        print(f"ddpbench: the process group was not ended cleanly at exit: {error}", file=sys.stderr, flush=True)
