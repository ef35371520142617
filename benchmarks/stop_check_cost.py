"""What the lockstep duration stop costs: steps mode vs duration mode (check every 1 and every K).

Runs the workload (2 ranks, gloo, CPU by default) under ``torchrun`` in three
configurations, alternating their order across repeats (ABC, CBA, ABC, ...):

* ``steps``       ``--steps N``: no stop collective at all (the baseline);
* ``dur K=1``     ``--duration-sec D --stop-check-every 1``;
* ``dur K=<k>``   ``--duration-sec D --stop-check-every k`` (k = the workload default).

Two estimates of the check's cost per step are printed:

* *across runs*: median step time of the configuration vs the ``steps`` baseline
  (medians over repeats of each run's per-rank median) — simple but noisy;
* *within run*: in each duration run, the median of the steps that ran the
  collective minus the median of those that did not, divided by K — the
  all-reduce's cost amortised per step, free of run-to-run noise.

Overhead % is relative to the baseline's median step. Usage::

    python benchmarks/stop_check_cost.py [--repeats 3] [--duration-sec 10] [--out docs/stop_check_cost.md]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import env, run_cmd
from ddpbench.trial.environment import cpu_model
from ddpbench.cluster.ports import free_ports

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "src" / "ddpbench" / "workload" / "ddp_mlp.py"
SMALL = {"input-dim": 512, "hidden-dim": 512, "hidden-layers": 2, "num-classes": 10,
         "batch-size": 64, "num-samples": 65536}
"""The "small" CPU model (per-rank batch 64)."""


def default_k() -> int:
    """The workload's default ``--stop-check-every``."""
    sys.path.insert(0, str(REPO / "src"))
    from ddpbench.workload.args import DEFAULT_STOP_CHECK_EVERY

    return DEFAULT_STOP_CHECK_EVERY





def run_once(stop_args: list[str], nproc: int, timeout: float, threads: int) -> list[dict[str, Any]]:
    """One torchrun of the workload; returns the rank records (raises on failure, kills the group on timeout)."""
    with tempfile.TemporaryDirectory() as metrics:
        model = [f"--{k}={v}" for k, v in SMALL.items()]
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
               "--master_addr=127.0.0.1", f"--master_port={free_ports(1)[0]}", str(SCRIPT), *model,
               "--warmup-steps=20", "--log-every=0", "--save-step-times", f"--metrics-dir={metrics}", *stop_args]
        code, _, err = run_cmd(cmd, Path.cwd(), timeout, {**env(), "OMP_NUM_THREADS": str(threads)}, quiet=True)
        if code != 0:
            raise RuntimeError(f"exit {code}: {err[-2000:]}")
        return [json.loads((Path(metrics) / f"rank-{r}.json").read_text()) for r in range(nproc)]


def within_run_cost_ms(record: dict[str, Any], k: int) -> float | None:
    """median(check steps) - median(other steps), divided by K: per-step share of the collective, ms."""
    times = record.get("step_times_ms") or []
    check = [t for i, t in enumerate(times, start=1) if i % k == 0]
    other = [t for i, t in enumerate(times, start=1) if i % k != 0]
    if k == 1 or not check or not other:
        return None
    return (statistics.median(check) - statistics.median(other)) / k


def measure(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """Alternating repeats; per configuration: per-run median step (ms), within-run cost (ms), step counts."""
    k = args.k
    configs = {
        "steps": [f"--steps={args.steps}"],
        "dur K=1": [f"--duration-sec={args.duration_sec}", "--stop-check-every=1"],
        f"dur K={k}": [f"--duration-sec={args.duration_sec}", f"--stop-check-every={k}"],
    }
    # K=1 within-run: compare against the steps baseline instead (every step checks).
    results: dict[str, dict[str, list[float]]] = {name: {"median": [], "within": [], "steps": []} for name in configs}
    names = list(configs)
    for rep in range(args.repeats):
        order = names if rep % 2 == 0 else names[::-1]
        for name in order:
            ranks = run_once(configs[name], args.nproc, args.timeout, args.threads)
            med = statistics.mean(r["step_time_ms"]["median"] for r in ranks)
            results[name]["median"].append(med)
            results[name]["steps"].append(float(ranks[0]["timed_steps"]))
            kk = int(configs[name][-1].split("=")[1]) if name.startswith("dur") else 0
            if kk > 1:
                costs = [c for r in ranks if (c := within_run_cost_ms(r, kk)) is not None]
                if costs:
                    results[name]["within"].append(statistics.mean(costs))
            print(f"repeat {rep + 1} {name:>10}: median step {med:.3f} ms, {int(ranks[0]['timed_steps'])} steps",
                  file=sys.stderr, flush=True)
    return results


def table(args: argparse.Namespace, results: dict[str, dict[str, list[float]]]) -> str:
    """Markdown report: machine, date, one row per configuration."""
    base = statistics.median(results["steps"]["median"])
    lines = [
        f"Stop-check cost, measured {_dt.date.today().isoformat()} on {cpu_model()}, "
        f"{os.cpu_count()} cores; {args.nproc} ranks, gloo, CPU, OMP_NUM_THREADS={args.threads}; "
        f"small model (input 512, hidden 512 x 2, 10 classes, batch 64/rank); "
        f"{args.repeats} alternating repeats, steps mode {args.steps} steps, duration mode {args.duration_sec} s.",
        "",
        "| config | median step ms (runs) | vs steps % | within-run check cost ms/step | within-run % of step |",
        "|---|---|---|---|---|",
    ]
    for name, res in results.items():
        med = statistics.median(res["median"])
        runs = ", ".join(f"{m:.3f}" for m in res["median"])
        vs = "baseline" if name == "steps" else f"{(med / base - 1) * 100:+.2f}"
        if res["within"]:
            w = statistics.median(res["within"])
            within, pct = f"{w:.4f}", f"{w / base * 100:.3f}"
        else:
            within = pct = "n/a"
        lines.append(f"| {name} | {med:.3f} ({runs}) | {vs} | {within} | {pct} |")
    k1 = statistics.median(results["dur K=1"]["median"]) - base
    lines += ["", f"K=1 runs the all-reduce every step: {k1:+.3f} ms/step vs steps mode "
              f"({k1 / base * 100:+.2f}%). Across-run figures are only meaningful on an otherwise idle machine; "
              "the within-run column is robust to run-to-run load changes."]
    return "\n".join(lines) + "\n"


def main() -> int:
    """Parse, measure, print (and optionally write) the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=600, help="steps-mode run length")
    p.add_argument("--duration-sec", type=float, default=8.0, help="duration-mode run length")
    p.add_argument("--k", type=int, default=None, help="K to compare with K=1 (default: the workload default)")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS per rank")
    p.add_argument("--timeout", type=float, default=300.0, help="per-run bound, s")
    p.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = p.parse_args()
    args.k = args.k or default_k()
    report = table(args, measure(args))
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
