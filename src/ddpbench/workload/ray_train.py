"""The driver of ``workload=ray_train``, one process per trial that trains a built-in model with Ray Train: checks
the harness's arguments (exit 2), connects to Ray (``--address``, or ``local``: an instance of its own on loopback),
builds the mode's trainer and calls ``fit()``; exit 0 when every worker finished, else one line and 1. docs/ray.md."""

from __future__ import annotations

import time

_PROCESS_START_EPOCH: float = time.time()

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional, Sequence  # noqa: E402

from ddpbench.errors import error_line  # noqa: E402

#: the value of ``--address`` that starts a Ray instance of the driver's own
LOCAL = "local"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ddpbench.workload.ray_train",
                                description="Train a built-in model with a Ray Train trainer (ddpbench).")
    p.add_argument("--trains", required=True, help="the built-in model: mlp, transformer, convnet")
    p.add_argument("--trainer", required=True, help='JSON: {"_target_": "module.Class", ...keyword arguments}')
    p.add_argument("--num-workers", type=int, required=True, help="Ray Train workers (the world size)")
    p.add_argument("--use-gpu", action="store_true", help="one GPU per worker")
    p.add_argument("--cpus-per-worker", type=float, default=1.0)
    p.add_argument("--placement", default="PACK", help="ScalingConfig.placement_strategy")
    p.add_argument("--backend", default="gloo", help="torch.distributed backend of Ray Train's process group")
    p.add_argument("--collective-timeout-sec", type=float, default=60.0)
    p.add_argument("--address", required=True, help=f"HOST:PORT of a running Ray cluster, or {LOCAL}")
    p.add_argument("--storage", required=True, help="Ray Train's storage_path (absolute)")
    p.add_argument("--name", required=True, help="Ray Train's run name")
    p.add_argument("harness", nargs=argparse.REMAINDER, help="-- then the harness's arguments")
    return p


def build_object(spec: Any) -> Any:
    """``spec`` with every ``{"_target_": "module.Class", ...}`` dict replaced by ``Class(**rest)`` (inner first)."""
    if isinstance(spec, dict):
        built = {k: build_object(v) for k, v in spec.items() if k != "_target_"}
        return import_target(spec["_target_"])(**built) if "_target_" in spec else built
    if isinstance(spec, list):
        return [build_object(v) for v in spec]
    return spec


def import_target(path: str) -> Any:
    """The object ``module.Name`` names."""
    module, _, name = str(path).rpartition(".")
    return getattr(importlib.import_module(module), name)


def check_harness_args(trains: str, argv: Sequence[str], world_size: int) -> List[str]:
    """The harness's arguments, checked as the workers will parse them (bad ones exit 2 here, one line)."""
    from ddpbench.workload.args import parse_args
    from ddpbench.workload.ray_worker import builtin_workload

    saved = os.environ.get("WORLD_SIZE")
    os.environ["WORLD_SIZE"] = str(world_size)
    try:
        parse_args(builtin_workload(trains), list(argv))
    finally:
        if saved is None:
            os.environ.pop("WORLD_SIZE", None)
        else:
            os.environ["WORLD_SIZE"] = saved
    threads = os.environ.get("OMP_NUM_THREADS")
    return [*argv, f"--threads={threads}"] if threads and threads.isdigit() and int(threads) > 0 else list(argv)


def connect(address: str, num_cpus: float) -> None:
    """``ray.init``: the cluster at ``address``, or (``local``) a Ray instance of this process on loopback."""
    import ray

    common: Dict[str, Any] = {"log_to_driver": True, "logging_level": logging.ERROR, "include_dashboard": False}
    if address == LOCAL:
        os.environ.pop("RAY_ADDRESS", None)  # a local instance, never a cluster named elsewhere
        # a new local Ray (>= 2.60: token auth by default) would write a token, every later `ray start` here demand it
        if not (Path.home() / ".ray" / "auth_token").exists():
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=max(1, int(num_cpus + 0.999)), _node_ip_address="127.0.0.1", **common)
    else:
        ray.init(address=address, **common)


def fit(args: argparse.Namespace, harness: List[str]) -> Any:
    """Build the trainer (the mode's spec plus ddpbench's configs) and run it; Ray Train's result."""
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig

    from ddpbench.workload.ray_worker import train_loop_per_worker

    spec = json.loads(args.trainer)
    kwargs = {k: build_object(v) for k, v in spec.items() if k != "_target_"}
    resources = {"CPU": args.cpus_per_worker, **({"GPU": 1.0} if args.use_gpu else {})}
    env = {k: v for k, v in os.environ.items() if k.startswith("DDPBENCH_")}  # the mode's settings for the harness
    trainer = import_target(spec["_target_"])(
        train_loop_per_worker,
        train_loop_config={"trains": args.trains, "argv": harness, "env": env, "driver_start": _PROCESS_START_EPOCH},
        scaling_config=ScalingConfig(num_workers=args.num_workers, use_gpu=args.use_gpu,
                                     resources_per_worker=resources, placement_strategy=args.placement),
        torch_config=TorchConfig(backend=args.backend, timeout_s=int(max(1.0, args.collective_timeout_sec))),
        run_config=RunConfig(name=args.name, storage_path=args.storage, failure_config=FailureConfig(max_failures=0)),
        **kwargs,
    )
    return trainer.fit()


def _one_line(error: BaseException) -> str:
    """The most telling line of a Ray Train failure: the last exception line in it, else its first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    named = [line for line in lines if ("Error" in line or "Exception" in line) and ":" in line]
    text = (named[-1] if named else lines[0] if lines else "")[:300]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one Ray Train job as the arguments say; the exit status (0 ok, 1 failed, 2 bad arguments)."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    harness = args.harness[1:] if args.harness[:1] == ["--"] else args.harness
    harness = check_harness_args(args.trains, harness, args.num_workers)

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report leaves this host
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        import ray
    except ImportError:
        return error_line("workload=ray_train needs Ray Train: pip install 'ddpbench[ray]'")
    error: Optional[str] = None
    try:
        connect(args.address, args.num_workers * args.cpus_per_worker + 1)
        connected = time.time()
        print(f"ray: connected in {connected - _PROCESS_START_EPOCH:.2f} s ({args.address})", flush=True)
        fit(args, harness)
        print(f"ray: fit() done after {time.time() - connected:.2f} s", flush=True)
    except KeyboardInterrupt as stopped:
        error = f"stopped by {stopped or 'SIGINT'}"
    except Exception as failed:  # Ray Train's failures: one line here, the workers' tracebacks above
        error = _one_line(failed)
    finally:
        try:
            ray.shutdown()
        except Exception:  # noqa: BLE001 - the cluster went away; Ray frees a dead driver's job itself
            pass
    if error:
        return error_line(f"ray_train: {error}", 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
