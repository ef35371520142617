"""What the built-in framework workloads (``workload=hf_trainer``, ``workload=lightning``) share: the harness's
arguments as the recorder's environment, and the Trainer hook a user's framework script gets."""

from __future__ import annotations

import os
from typing import Any, Dict

from ddpbench.workload import recorder
from ddpbench.workload.args import RankArgs
from ddpbench.workload.frameworks import attach


def recorder_environment(args: RankArgs[Any], workload: str) -> Dict[str, str]:
    """The recorder's variables for parsed harness arguments (``--steps``/``--duration-sec``, warmup, faults)."""
    return recorder.environment(
        args.metrics_dir or "", warmup_steps=args.warmup_steps, save_step_times=args.save_step_times, workload=workload,
        steps=args.steps, duration_s=args.duration_sec, check_every=args.stop_check_every,
        clock_skew_s=args.fault_clock_skew_sec, fault_rank=args.fault_rank,
    )


def prepare(args: RankArgs[Any], workload: str) -> None:
    """Put the recorder's settings in this rank's environment, install the Trainer hook (before the framework loads)."""
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    os.environ.update(recorder_environment(args, workload))
    if args.metrics_dir:
        attach.install()


def world() -> tuple[int, int]:
    """(processes per node, nodes) from torchrun's environment (a world of one without it)."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return local, max(1, int(os.environ.get("WORLD_SIZE", "1")) // local)
