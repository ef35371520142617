"""A user's own DDP training script, as ddpbench finds it: its own flags, its own loop, its own figures.

Run by hand:  torchrun --nproc-per-node=2 tests/scripts/ddp_user_script.py --steps=30
Under ddpbench (README "Your own training script"):
    python3 -m ddpbench workload=script workload.path=tests/scripts/ddp_user_script.py \\
        'workload.args=["--steps=30"]' 'workload.metrics.steps_per_s="steps_per_s=([0-9.]+)"'

Rank 0 prints ``steps_per_s=<x>`` once at the end. ``--recorder`` marks the steps with ddpbench's
recorder (``workload.records=true``): per-step figures, the wall decomposition and the lockstep
duration stop; without ddpbench's environment the recorder does nothing.
"""

import argparse
import gc
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30, help="training steps")
    parser.add_argument("--batch-size", type=int, default=16, help="samples per step and rank")
    parser.add_argument("--width", type=int, default=32, help="hidden width")
    parser.add_argument("--crash-at-step", type=int, default=None, help="raise at this step (tests)")
    parser.add_argument("--recorder", action="store_true", help="mark steps with ddpbench's recorder")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, args.width), torch.nn.GELU(), torch.nn.Linear(args.width, 4)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(args.batch_size, 16), torch.randint(0, 4, (args.batch_size,))

    recorder = None
    if args.recorder:
        from ddpbench.workload.recorder import Recorder

        recorder = Recorder(batch_size=args.batch_size)
    start = time.perf_counter()
    step = 0
    loss = torch.zeros(())
    while step < args.steps and not (recorder is not None and recorder.should_stop()):
        step += 1
        if args.crash_at_step == step:
            raise RuntimeError(f"user script crashed at step {step}")
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if recorder is not None:
            recorder.step_done(loss)
    elapsed = time.perf_counter() - start
    if recorder is not None:
        recorder.finish()
    if rank == 0:
        print(f"done: steps={step} loss={loss.item():.4f}", flush=True)
        print(f"steps_per_s={step / elapsed:.3f}", flush=True)
    # DDP's reducer holds the group: freed after destroy_process_group, its gloo threads can abort the
    # rank ("terminate called without an active exception") when a peer closed first
    del model, optimizer
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
