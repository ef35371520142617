"""What ddpbench's framework recorder costs per optimizer step, against the smallest framework step.

Two parts:

1. **The step**: the plain test scripts (``tests/scripts/hf_trainer_script.py``: a 1-layer GPT-2 of width 16,
   batch 4, 16 tokens; ``tests/scripts/lightning_script.py``: Linear(16, 32)+GELU+Linear, batch 8) run under
   ``torchrun --nproc-per-node 2`` with the recorder attached as in a trial (the hook on ``PYTHONPATH``);
   their rank records give the median optimizer step.
2. **The callback's own work**: in this process, the HF callback's ``on_step_end`` and the Lightning
   callback's ``on_train_batch_end`` called ``--calls`` times in a row (``stop=steps``, a limit never
   reached), the mean per call. That is everything the recorder adds to a step under ``timing=step``: no
   synchronisation, no collective (stop=duration adds the lockstep check: benchmarks/stop_check_cost.py).

Usage: ``python benchmarks/framework_recorder_cost.py [--steps 200] [--calls 20000] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, load, machine_line, now_utc, run_cmd, write_out  # noqa: E402

from ddpbench.workload import recorder  # noqa: E402
from ddpbench.workload.frameworks import ENV_HOOK, SITE_HOOK_DIR  # noqa: E402

SCRIPTS = {"hf_trainer": REPO / "tests" / "scripts" / "hf_trainer_script.py",
           "lightning": REPO / "tests" / "scripts" / "lightning_script.py"}


def recorder_env(metrics_dir: str, steps: int, warmup: int) -> Dict[str, str]:
    return recorder.environment(metrics_dir, warmup_steps=warmup, save_step_times=False, workload="bench", steps=steps)


def framework_step_ms(name: str, steps: int, warmup: int) -> float:
    """Median optimizer step (ms, mean of the two ranks' medians) of one test script under torchrun."""
    with tempfile.TemporaryDirectory() as work:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("TRACEML_")}
        environ.update(recorder_env(f"{work}/metrics", steps, warmup))
        environ.update({ENV_HOOK: "1", "OMP_NUM_THREADS": "1",
                        "PYTHONPATH": os.pathsep.join([str(SITE_HOOK_DIR), environ.get("PYTHONPATH", "")])})
        code, _, err = run_cmd([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
                                str(SCRIPTS[name]), "--max-steps=100000"], Path(work), 900, environ, quiet=True)
        if code != 0:
            raise RuntimeError(f"{name} exited {code}:\n{err}")
        medians = [json.loads(p.read_text())["step_time_ms"]["median"] for p in Path(work, "metrics").glob("rank-*.json")]
        return statistics.mean(medians)


def own_cost_us(calls: int) -> Dict[str, float]:
    """Mean µs per call of each callback's per-step method (a world of one, stop limit never reached)."""
    os.environ.update({"RANK": "0", "WORLD_SIZE": "1"})
    with tempfile.TemporaryDirectory() as work:
        os.environ.update(recorder_env(work, 10 * calls, 0))
        from transformers import TrainerControl, TrainerState, TrainingArguments

        from ddpbench.workload.frameworks.hf_callback import RecorderTrainerCallback
        from ddpbench.workload.frameworks.pl_callback import recorder_callback_class

        args = TrainingArguments(output_dir=work, report_to=[], use_cpu=True)
        state, control = TrainerState(), TrainerControl()
        hf = RecorderTrainerCallback()
        hf.on_train_begin(args, state, control)
        t0 = time.perf_counter()
        for _ in range(calls):
            hf.on_step_end(args, state, control)
        hf_us = (time.perf_counter() - t0) / calls * 1e6

        pl = recorder_callback_class("lightning.pytorch")()
        trainer: Any = SimpleNamespace(global_step=0, should_stop=False, accumulate_grad_batches=1, precision="32-true",
                                       strategy=SimpleNamespace(root_device=SimpleNamespace(type="cpu")))
        pl.on_train_batch_start(trainer, None, [[0] * 8], 0)
        t0 = time.perf_counter()
        for i in range(calls):
            trainer.global_step = i + 1
            pl.on_train_batch_end(trainer, None, None, None, i)
        pl_us = (time.perf_counter() - t0) / calls * 1e6
    return {"hf_trainer": hf_us, "lightning": pl_us}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="timed optimizer steps per framework run")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    parser.add_argument("--calls", type=int, default=20000, help="callback calls timed in this process")
    parser.add_argument("--out", type=Path, default=None, help="also write the table (.md) or the data (.json)")
    args = parser.parse_args()
    before = load()
    step_ms = {name: framework_step_ms(name, args.steps, args.warmup) for name in SCRIPTS}
    cost = own_cost_us(args.calls)
    smallest = min(step_ms.values())
    lines = [f"Framework recorder cost (timing=step), measured {now_utc()}; {machine_line()}; 2 ranks, gloo, CPU, "
             f"OMP_NUM_THREADS=1; {args.steps} timed steps per framework run; own work over {args.calls} calls; "
             f"load average before: {before}.", "",
             "| framework | median optimizer step ms | callback's own work µs/step | % of its step | % of the smallest step | ≤ 0.5 % |",
             "|---|---|---|---|---|---|"]
    for name in SCRIPTS:
        share, worst = 100 * cost[name] / 1000 / step_ms[name], 100 * cost[name] / 1000 / smallest
        lines.append(f"| {name} | {step_ms[name]:.3f} | {cost[name]:.2f} | {share:.3f} | {worst:.3f} | "
                     f"{'yes' if worst <= 0.5 else 'no'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    write_out(args.out, text, {"step_ms": step_ms, "own_us": cost, "load_before": before, "when": now_utc()})


if __name__ == "__main__":
    main()
