"""Where a rank runs: placement and precision, the process groups, and TraceML's step marker (under ``traceml run``
only: otherwise ``traceml_ai`` is never imported)."""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Any, Callable, ContextManager

from ddpbench.choices import Device, DistBackend, Precision
from ddpbench.workload.args import RankArgs

TraceStep = Callable[[Any], ContextManager[Any]]
"""``traceml_ai.trace_step``: a context manager around one step, given the model before DDP."""


class Runtime:
    """Resolved placement and precision of this rank (what the rank JSON reports)."""

    def __init__(self, device: str, backend: str, precision: str) -> None:
        """``device`` auto | cpu | cuda, ``backend`` auto | gloo | nccl, ``precision`` fp32 | bf16 | fp16."""
        import torch

        self.rank = int(os.environ["RANK"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.node_rank = int(os.environ.get("GROUP_RANK", "0"))
        want_cuda = device == Device.cuda or (device == Device.auto and torch.cuda.is_available())
        if want_cuda and not torch.cuda.is_available():
            raise ValueError("--device cuda but CUDA is not available")
        self.device = str(Device.cuda if want_cuda else Device.cpu)
        # a user's script may run any backend torch has (mpi, ucc, ...): only auto is resolved here
        self.backend = str(DistBackend.auto.on(self.device) if backend == DistBackend.auto else backend)
        if self.backend == DistBackend.nccl and self.device != Device.cuda:
            raise ValueError("--backend nccl needs --device cuda")
        self.precision = str(precision)
        self.torch_device = (torch.device(self.device, self.local_rank) if self.device == Device.cuda
                             else torch.device("cpu"))

    def autocast(self) -> ContextManager[Any]:
        """Autocast context for the forward pass (none for fp32)."""
        import torch

        if self.precision == Precision.fp32:
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.precision == Precision.bf16 else torch.float16
        return torch.autocast(device_type=self.device, dtype=dtype)

    def init_device(self) -> None:
        """Make this rank's device current and its CUDA context now (a start-up part of its own); nothing on CPU."""
        if self.device == Device.cuda:
            import torch

            torch.cuda.set_device(self.torch_device)
            torch.cuda.synchronize()

    def synchronize(self) -> None:
        """CUDA synchronize; nothing on CPU."""
        if self.device == Device.cuda:
            import torch

            torch.cuda.synchronize()


def ensure_single_process_env() -> None:
    """Without torchrun, make ``env://`` rendezvous work as a world of one (on a port free right now)."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for name, value in (("RANK", 0), ("LOCAL_RANK", 0), ("WORLD_SIZE", 1), ("MASTER_ADDR", "127.0.0.1"),
                        ("MASTER_PORT", port)):
        os.environ.setdefault(name, str(value))


def init_process_group(args: RankArgs[Any], rt: Runtime) -> Any:
    """Create the default process group (unless the launcher made it: Ray Train); the gloo group of the stop flag and
    the record gather (None: the default group; a second one on nccl, so that they never synchronise the GPU)."""
    import datetime

    import torch
    import torch.distributed as dist

    if rt.device == Device.cuda:
        torch.cuda.set_device(rt.torch_device)
    kwargs: dict[str, Any] = {"backend": rt.backend}
    if args.collective_timeout_sec is not None:
        kwargs["timeout"] = datetime.timedelta(seconds=args.collective_timeout_sec)
    if not dist.is_initialized():
        dist.init_process_group(**kwargs)
    if rt.backend == DistBackend.gloo:
        return None  # the default group
    return dist.new_group(backend="gloo", timeout=kwargs.get("timeout"))


def init_traceml(args: RankArgs[Any], *, init: bool = True) -> TraceStep | None:
    """Under ``traceml run`` with telemetry on: ``traceml_ai.init(mode)`` unless ``init`` is False (a Ray Train
    trainer did it; call it before the data loader exists, so auto mode can patch it), ``trace_step``; else None (no
    import)."""
    if not os.environ.get("TRACEML_SESSION_ID") or os.environ.get("TRACEML_DISABLED") == "1":
        return None
    import traceml_ai

    if init:
        traceml_ai.init(mode=args.traceml_mode)
    return traceml_ai.trace_step  # type: ignore[no-any-return]
