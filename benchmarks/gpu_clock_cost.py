"""What the device step clock costs a GPU step: its own work per step against the native step, on CUDA.

The clock (:class:`ddpbench.workload.device_time.DeviceStepClock`) records two CUDA events per timed step and
reads two elapsed times per step, ``RING`` - 2 steps late. In one process (a world of one: ``torchrun`` is not
needed) on the GPU this script measures, with the harness's own pieces:

* *own work*: the clock's per-step calls (``step_begins``, ``step_ends``, ``collect``) around no device work,
  over ``--own-steps`` steps: µs per step (mean). This is the clock's cost itself, free of the step's noise;
* *the native step*: the reference MLP's step (``model=seed_e2e`` sizes; ``--small`` for a quick look) in the
  loop of ``--host-sync`` (default ``seed``), ``--steps`` steps without the clock: mean ms;
* *side by side*: ``--pairs`` alternating blocks of ``--block-steps`` steps with and without the clock attached
  to the trainer (order reversed every other pair): the median per-pair difference, % (noisy; shown for scale).

The bound: own work <= 0.5 % of the native step. On a machine without CUDA it says so and checks that the clock
is None there (no events, nothing per step on CPU); exit 0.

Usage::

    python benchmarks/gpu_clock_cost.py [--small] [--json FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BOUND_PCT = 0.5
#: model=seed_e2e's MLP sizes (conf/model/seed_e2e.yaml); --small: the CPU default's
SEED_E2E = ["--input-dim=4096", "--hidden-dim=4096", "--hidden-layers=4", "--num-classes=1000", "--batch-size=256"]
SMALL = ["--input-dim=512", "--hidden-dim=512", "--hidden-layers=2", "--num-classes=10", "--batch-size=64"]


def own_work_us(steps: int) -> float:
    """The clock's own calls per step around no device work, µs (mean over ``steps``)."""
    import torch

    from ddpbench.workload.device_time import DeviceStepClock

    clock = DeviceStepClock()
    torch.cuda.synchronize()
    clock.start()
    t0 = time.perf_counter()
    for _ in range(steps):
        clock.step_begins()
        clock.step_ends()
        clock.collect()
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    clock.finish()
    return elapsed / steps * 1e6


def measure(argv: list[str], steps: int, pairs: int, block_steps: int, own_steps: int) -> dict[str, Any]:
    """The three figures on this process's GPU (see the module doc)."""
    import torch

    from ddpbench.workload.args import parse_args
    from ddpbench.workload.data import build_loader, endless_batches
    from ddpbench.workload.ddp_mlp import MLP
    from ddpbench.workload.device_time import DeviceStepClock
    from ddpbench.workload.loop import Trainer, run_warmup
    from ddpbench.workload.runtime import Runtime, ensure_single_process_env, init_process_group

    ensure_single_process_env()
    workload = MLP()
    args = parse_args(workload, [*argv, "--steps=1", "--device=cuda", "--num-samples=16384", "--log-every=0"])
    rt = Runtime(args.device, args.backend, args.precision)
    rt.init_device()
    init_process_group(args, rt)
    trainer = Trainer(workload, args, rt, None)
    loader, sampler = build_loader(args, rt, workload.build_dataset(args), workload.sample_transform(args))
    batches = endless_batches(loader, sampler)
    run_warmup(trainer, batches, 30)

    def block(n: int, with_clock: bool) -> float:
        clock = DeviceStepClock() if with_clock else None
        rt.synchronize()
        if clock is not None:
            clock.start()
        trainer.clock = clock
        t0 = time.perf_counter()
        for _ in range(n):
            trainer.step(next(batches), inject=False)
            if clock is not None:
                clock.collect()
        rt.synchronize()
        elapsed = time.perf_counter() - t0
        trainer.clock = None
        if clock is not None:
            clock.finish()
        return elapsed / n * 1000.0

    native_ms = block(steps, False)
    with_ms: list[float] = []
    without_ms: list[float] = []
    for pair in range(pairs):
        for clocked in ((True, False) if pair % 2 == 0 else (False, True)):
            (with_ms if clocked else without_ms).append(block(block_steps, clocked))
    own = own_work_us(own_steps)
    torch.distributed.destroy_process_group()
    return {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "native_ms": native_ms,
            "own_us": own, "own_pct": own / 1000.0 / native_ms * 100.0, "with_ms": with_ms, "without_ms": without_ms,
            "host_sync": args.host_sync, "precision": rt.precision}


def line(r: dict[str, Any], steps: int, pairs: int, block_steps: int, own_steps: int, when: str) -> str:
    """One summary line (the device check prints it)."""
    diffs = [100.0 * (w / b - 1.0) for w, b in zip(r["with_ms"], r["without_ms"])]
    side = f"{statistics.median(diffs):+.2f} % (median of {pairs} pairs of {block_steps} steps)" if diffs else "n/a"
    return (f"{when}, {r['gpu']}, torch {r['torch']}, {r['precision']}, host_sync={r['host_sync']}: the clock's own "
            f"work {r['own_us']:.2f} µs/step over {own_steps} steps = {r['own_pct']:.3f} % of the native "
            f"{r['native_ms']:.3f} ms step ({steps} steps): {'within' if r['own_pct'] <= BOUND_PCT else 'OVER'} the "
            f"{BOUND_PCT:g} % bound; side by side {side}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="the CPU default's MLP instead of model=seed_e2e's")
    p.add_argument("--host-sync", default="seed", help="the loop's host-sync pattern (default seed)")
    p.add_argument("--precision", default="fp16", help="autocast precision (default fp16)")
    p.add_argument("--steps", type=int, default=300, help="native steps timed without the clock")
    p.add_argument("--pairs", type=int, default=6, help="side-by-side block pairs")
    p.add_argument("--block-steps", type=int, default=100, help="steps per side-by-side block")
    p.add_argument("--own-steps", type=int, default=20000, help="steps of the clock's own work")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    p.add_argument("--out", type=Path, default=None, help="write the summary line here")
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import now_utc

    import torch

    from ddpbench.workload.device_time import step_clock

    if not torch.cuda.is_available():
        assert step_clock("cpu") is None  # no events, nothing per step on CPU
        text = "no CUDA device here: nothing to measure (on CPU the loop records no events)"
        result: dict[str, Any] = {"gpu": None}
    else:
        sizes = SMALL if args.small else SEED_E2E
        result = measure([*sizes, f"--host-sync={args.host_sync}", f"--precision={args.precision}"], args.steps,
                         args.pairs, args.block_steps, args.own_steps)
        text = line(result, args.steps, args.pairs, args.block_steps, args.own_steps, now_utc())
    print(text, flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
