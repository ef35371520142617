"""What the built-in framework workloads (``workload=hf_trainer``, ``workload=lightning``) share: the harness's
arguments as the recorder's environment, and the Trainer hook a user's framework script gets."""

from __future__ import annotations

import os
from typing import Any

from ddpbench.workload import recorder
from ddpbench.workload.args import RankArgs
from ddpbench.workload.frameworks import attach


def prepare(args: RankArgs[Any], workload: str) -> None:
    """Put the recorder's settings in this rank's environment, install the Trainer hook (before the framework loads)."""
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    os.environ.update(recorder.environment(
        args.metrics_dir or "", warmup_steps=args.warmup_steps, save_step_times=args.save_step_times, workload=workload,
        steps=args.steps, duration_s=args.duration_sec, check_every=args.stop_check_every,
        clock_skew_s=args.fault_clock_skew_sec, fault_rank=args.fault_rank,
    ))
    if args.metrics_dir:
        attach.install()
