"""What the workload harness adds to the step it times (``timing=step``), per built-in workload.

For each workload at ``model=small`` (sizes read from conf/model/small.yaml and conf/workload/*.yaml)
one ``torchrun`` of 2 CPU ranks (gloo, OMP_NUM_THREADS=1) runs this file as its worker, which builds
the workload with the harness's own pieces and measures, in the same processes:

* *side by side*: alternating blocks of N steps of a bare loop (``trainer.step(next(batches))``,
  nothing else) and N steps of the harness's timed loop (:func:`ddpbench.workload.loop.run_timed`:
  step boundaries, fault check, stop rule, progress check); the per-pair ratio of their mean step
  times, order reversed every other pair. Noisy on a shared machine: its spread is printed.
* *own work*: the harness's timed loop around a step that does nothing (20,000 steps): the loop's
  per-step bookkeeping in µs (mean), divided by the bare step time. This is the harness's cost itself,
  free of run-to-run noise; the bound is 0.5 % of the step.

Usage::

    python benchmarks/harness_step_cost.py [--pairs 30] [--block-steps 20] [--out docs/harness_step_cost.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = ("mlp", "transformer", "convnet")
BOUND_PCT = 0.5
OWN_WORK_STEPS = 20000


def small_args(workload: str) -> list[str]:
    """The workload script's arguments at model=small, as ddpbench would pass them."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"model": OmegaConf.load(REPO / "conf" / "model" / "small.yaml"),
                            "workload": OmegaConf.load(REPO / "conf" / "workload" / f"{workload}.yaml")})
    sizes = [f"--{k}={v}" for k, v in cfg.workload.size_args.items()]
    return [*sizes, f"--batch-size={cfg.model.batch_size}", f"--num-samples={cfg.model.num_samples}",
            f"--lr={cfg.model.lr}", "--log-every=0"]


def _workload(script: str) -> Any:
    """The Workload instance defined in ddpbench.workload.<script stem>."""
    from ddpbench.workload.base import Workload

    module = importlib.import_module(f"ddpbench.workload.{Path(script).stem}")
    (cls,) = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Workload) and v is not Workload]
    return cls()


def worker(script: str, argv: list[str], pairs: int, block_steps: int, out: str) -> None:
    """Inside torchrun: alternate bare and harness blocks, then time the harness around a no-op step."""
    from ddpbench.workload.args import parse_args
    from ddpbench.workload.data import build_loader, endless_batches
    from ddpbench.workload.loop import Trainer, run_timed, run_warmup
    from ddpbench.workload.runtime import Runtime, init_process_group
    from ddpbench.workload.stop import Faults, StopRule

    workload = _workload(script)
    args = parse_args(workload, [*argv, f"--steps={block_steps}"])
    import torch

    rt = Runtime(args.device, args.backend, args.precision)
    group = init_process_group(args, rt)
    trainer = Trainer(workload, args, rt, None)
    loader, sampler = build_loader(args, rt, workload.build_dataset(args), workload.sample_transform(args))
    batches = endless_batches(loader, sampler)
    run_warmup(trainer, batches, 20)

    def bare() -> float:
        rt.synchronize()
        t0 = time.perf_counter()
        for _ in range(block_steps):
            trainer.step(next(batches), inject=False)
        rt.synchronize()
        return (time.perf_counter() - t0) / block_steps * 1000.0

    def harness() -> float:
        res = run_timed(args, rt, trainer, batches, StopRule(args, rt.rank, group), Faults(args, rt.rank))
        return sum(res.durations_s) / len(res.durations_s) * 1000.0

    bare_ms: list[float] = []
    harness_ms: list[float] = []
    for pair in range(pairs):
        for kind in (("bare", "harness") if pair % 2 == 0 else ("harness", "bare")):
            (bare_ms if kind == "bare" else harness_ms).append(bare() if kind == "bare" else harness())

    class NoOpStep:
        zero = torch.zeros(())

        def step(self, batch: Any, inject: bool) -> Any:
            return self.zero

    long = dataclasses.replace(args, steps=OWN_WORK_STEPS)
    res = run_timed(long, rt, NoOpStep(), itertools.repeat(None), StopRule(long, rt.rank, group),  # type: ignore[arg-type]
                    Faults(long, rt.rank))
    own_us = statistics.fmean(res.durations_s) * 1e6
    if rt.rank == 0:
        Path(out).write_text(json.dumps({"bare_ms": bare_ms, "harness_ms": harness_ms, "own_us": own_us}))
    torch.distributed.destroy_process_group()


def measure(workload: str, pairs: int, block_steps: int, timeout: float) -> dict[str, Any]:
    """One torchrun of this file as the worker for ``workload``; rank 0's figures."""
    from _common import env, run_cmd
    from ddpbench.trial.ports import free_ports
    from omegaconf import OmegaConf

    script = str(OmegaConf.load(REPO / "conf" / "workload" / f"{workload}.yaml").script)
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "result.json")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
               f"--master_port={free_ports(1)[0]}", str(Path(__file__).resolve()), "--worker", script,
               f"--pairs={pairs}", f"--block-steps={block_steps}", f"--result={out}", "--", *small_args(workload)]
        code, _, err = run_cmd(cmd, REPO, timeout, {**env(), "OMP_NUM_THREADS": "1"}, quiet=True)
        if code != 0:
            raise RuntimeError(f"{workload}: exit {code}: {err[-2000:]}")
        return json.loads(Path(out).read_text())  # type: ignore[no-any-return]


def table(results: dict[str, dict[str, Any]], pairs: int, block_steps: int, machine: str, when: str, load: str) -> str:
    """Markdown: one row per workload."""
    lines = [
        f"Harness step cost (timing=step), measured {when} on {machine}; 2 ranks, gloo, CPU, OMP_NUM_THREADS=1; "
        f"model=small; {pairs} alternating pairs of {block_steps}-step blocks; own work over {OWN_WORK_STEPS} "
        f"no-op steps; load average before: {load}.",
        "",
        "| workload | bare step ms (median of blocks) | harness step ms | side by side % (median, min..max of pairs) "
        "| harness own work µs/step | own work % of step | ≤ 0.5 % |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        bare, harness = statistics.median(r["bare_ms"]), statistics.median(r["harness_ms"])
        ratios = [(h / b - 1) * 100 for b, h in zip(r["bare_ms"], r["harness_ms"])]
        own_pct = r["own_us"] / 1000.0 / bare * 100
        lines.append(f"| {name} | {bare:.3f} | {harness:.3f} | {statistics.median(ratios):+.2f} "
                     f"({min(ratios):+.2f}..{max(ratios):+.2f}) | {r['own_us']:.2f} | {own_pct:.3f} | "
                     f"{'yes' if own_pct <= BOUND_PCT else 'NO'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Worker mode under torchrun, or the driver: measure every workload and print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=30, help="alternating bare/harness block pairs")
    p.add_argument("--block-steps", type=int, default=20, help="steps per block")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per workload")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--out", type=Path, default=None, help="also write the table (.md) or the figures (.json)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--result", default=None, help=argparse.SUPPRESS)
    p.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.rest, args.pairs, args.block_steps, args.result)
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import cpu_model, load, now_utc, write_out

    machine = f"{cpu_model()}, {__import__('os').cpu_count()} cores, Linux, torch {__import__('torch').__version__}"
    when, before = now_utc(), load()
    results = {}
    for name in args.workloads.split(","):
        results[name] = measure(name, args.pairs, args.block_steps, args.timeout)
        print(f"{name}: bare {statistics.median(results[name]['bare_ms']):.3f} ms, "
              f"own work {results[name]['own_us']:.2f} µs/step", file=sys.stderr, flush=True)
    text = table(results, args.pairs, args.block_steps, machine, when, before)
    print(text)
    write_out(args.out, text, {"machine": machine, "when": when, "load_before": before, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
