"""What ddpbench itself costs: its native trials against the same workload run by bare torchrun.

Alternates, per repeat (order ABBA...), one ddpbench native trial and one bare run:

* **ddpbench**: ``python -m ddpbench -m mode=native repeat=i model=small sweep_name=NAME`` — all
  repeats share one sweep dir, so together they are a 5-trial native sweep;
* **bare**: ``python -m torch.distributed.run --nnodes=1 --nproc-per-node=2 --node-rank=0
  --master-addr=127.0.0.1 --master-port=P src/ddpbench/workload/ddp_mlp.py <args>`` with the
  *same* workload arguments (``ddpbench.trial.command.workload_args`` of the trial's resolved
  config) and the same environment (OMP_NUM_THREADS/MKL_NUM_THREADS=1, PYTHONUNBUFFERED=1).

Two ratios against the bare run's wall (Popen to exit, monotonic clock):

* **command wall**: the trial's ``wall_s`` (ddpbench's guarded torchrun, spawn to exit) — like
  for like, the cost of the guard, watchdog and port/record handling around the same command;
  goal <= 1.05;
* **driver per trial**: the whole ``python -m ddpbench`` invocation's wall (interpreter start,
  Hydra composition, the trial, trial.json, and the report the callback writes at the end) —
  an upper bound on what one more trial costs inside a longer sweep.

Usage::

    python benchmarks/harness_overhead.py [--repeats 5] [--model small] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ddpbench.cluster.ports import free_ports  # noqa: E402
from _common import REPO, add_sweep_arguments, ddpbench, env, load, machine_line, now_utc, run_cmd, stamp, trials, warm_up, write_out  # noqa: E402

GOAL = 1.05


def bare_command(config: dict, metrics_dir: str, port: int) -> list[str]:
    """The bare torchrun argv that runs the trial's workload with the trial's arguments."""
    from omegaconf import OmegaConf

    from ddpbench.config.convert import typed_trial
    from ddpbench.trial.command import WORKLOAD_DIR, workload_args

    cfg = typed_trial(OmegaConf.create(config))
    c = cfg.cluster
    return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={c.nnodes}",
            f"--nproc-per-node={c.nproc_per_node}", "--node-rank=0", f"--master-addr={c.master_addr}",
            f"--master-port={port}", str(WORKLOAD_DIR / cfg.workload.script), *workload_args(cfg, metrics_dir)]


def bare_env(config: dict) -> dict[str, str]:
    """ddpbench's node environment for a local native trial."""
    e = env()
    threads = int(config["cluster"]["threads_per_rank"])
    if threads > 0:
        e["OMP_NUM_THREADS"] = e["MKL_NUM_THREADS"] = str(threads)
    e["PYTHONUNBUFFERED"] = "1"
    return e


def run_bare(config: dict, timeout: float) -> float:
    """One bare torchrun of the workload; returns its wall seconds (raises on failure)."""
    with tempfile.TemporaryDirectory(prefix="ddpbench-bare-") as metrics:
        cmd = bare_command(config, metrics, free_ports(1)[0])
        code, wall, err = run_cmd(cmd, REPO, timeout, bare_env(config), quiet=True)
        if code != 0:
            raise RuntimeError(f"bare run exited {code}:\n{err}")
        if not list(Path(metrics).glob("rank-*.json")):
            raise RuntimeError("bare run wrote no rank records")
    return wall



def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sweep_arguments(p, "trials of each kind")
    p.add_argument("--timeout", type=float, default=600.0, help="per-run bound, s")
    args = p.parse_args(argv)
    common = [f"model={args.model}", *args.extra]
    tag = stamp()
    name = f"bench-harness-{tag}"
    sweep_dir = args.workdir / "outputs" / "multirun" / name
    started, load_before = now_utc(), load()
    if not args.no_warmup:
        warm_up(common, args.workdir, f"bench-harness-warmup-{tag}")
    config = None
    driver, command, bare = [], [], []
    for rep in range(1, args.repeats + 1):
        order = ("ddpbench", "bare") if rep % 4 in (1, 0) else ("bare", "ddpbench")  # ABBA ABBA ...
        if config is None:
            order = ("ddpbench", "bare")  # the bare run needs the trial's resolved config
        for kind in order:
            if kind == "ddpbench":
                wall = ddpbench(["-m", "mode=native", f"repeat={rep}", *common, f"sweep_name={name}"], args.workdir,
                                timeout=args.timeout)
                trial = [t for t in trials(sweep_dir) if t["repeat"] == rep][-1]
                if trial["status"] != "ok":
                    raise RuntimeError(f"trial {rep}: {trial['status']}: {trial['error']}")
                config = config or trial["config"]
                driver.append(wall)
                command.append(float(trial["wall_s"]))
            else:
                assert config is not None, "a ddpbench trial runs first and gives the bare run its config"
                bare.append(run_bare(config, args.timeout))
            print(f"repeat {rep} {kind:>8}: {(driver if kind == 'ddpbench' else bare)[-1]:.2f} s", file=sys.stderr,
                  flush=True)

    def s(xs: list[float]) -> str:
        sd = statistics.stdev(xs) if len(xs) > 1 else float("nan")
        return f"{statistics.mean(xs):.2f} ± {sd:.2f}"

    b = statistics.mean(bare)
    r_cmd = statistics.mean(command) / b
    r_drv = statistics.mean(driver) / b
    lines = [
        f"harness_overhead  {started}",
        machine_line(),
        f"load average (1/5/15 min) before: {load_before}; after: {load()}",
        f"{args.repeats} alternating repeats (ABBA); python -m ddpbench -m mode=native {' '.join(common)} "
        f"vs bare torchrun with the same workload args; 2 ranks, gloo, CPU, OMP_NUM_THREADS=1",
        "",
        "| run | wall s (mean ± SD) | per repeat | ratio to bare | goal |",
        "|---|---|---|---|---|",
        f"| bare torchrun | {s(bare)} | {', '.join(f'{x:.2f}' for x in bare)} | 1.000 | |",
        f"| ddpbench trial wall_s (guarded command) | {s(command)} | {', '.join(f'{x:.2f}' for x in command)} | "
        f"{r_cmd:.3f} | <= {GOAL}: {'met' if r_cmd <= GOAL else 'MISSED'} |",
        f"| ddpbench whole driver per trial (Hydra job + report) | {s(driver)} | "
        f"{', '.join(f'{x:.2f}' for x in driver)} | {r_drv:.3f} | |",
        "",
        f"driver cost outside the command: {statistics.mean(driver) - statistics.mean(command):.2f} s per trial "
        "(interpreter start, Hydra, trial.json, report)",
        f"sweep dir: {sweep_dir}",
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(args.out, text, {"benchmark": "harness_overhead", "started": started, "machine": machine_line(),
                               "load_before": load_before, "load_after": load(), "repeats": args.repeats,
                               "overrides": common, "bare_wall_s": bare, "trial_wall_s": command,
                               "driver_wall_s": driver, "ratio_command": r_cmd, "ratio_driver": r_drv,
                               "sweep_dir": str(sweep_dir)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
