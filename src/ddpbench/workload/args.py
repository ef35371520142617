"""The workload harness's command line: the arguments every workload shares, plus the model's own.

Every built-in workload script accepts the same stop, data, runtime, fault and calibration
arguments (docs/workload.md has the table); a :class:`~ddpbench.workload.base.Workload` adds its
model-size arguments to the ``model and data`` group. Parsing never imports torch, so bad input
fails in a fraction of a second with one line and exit status 2, before any process group exists.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import TYPE_CHECKING, Callable, NoReturn, Sequence, TypeVar

from ddpbench.formats.rank_loop import GC_MODES, HARNESS_HOST_SYNCS
from ddpbench.formats.rank_record import LOADERS, TIMINGS
from ddpbench.formats.switching import SWITCH_WHAT

if TYPE_CHECKING:  # pragma: no cover
    from ddpbench.workload.base import Workload

TOOL_DIR_ENV = "DDPBENCH_TOOL_DIR"
"""Environment variable giving the folder an in-process tool writes into (default of ``--tool-dir``)."""

TRACEML_MODE_ENV = "DDPBENCH_TRACEML_MODE"
"""Environment variable selecting the TraceML init mode (``auto`` or ``manual``)."""

ARGS_ENV = "DDPBENCH_WORKLOAD_ARGS"
"""The workload's arguments as a JSON list, read when its command line has none: for a launcher that forwards
none to the script (traceml-ai 0.3.0 under torchrun; its mode's ``env_by_version`` sets it)."""

DEFAULT_STOP_CHECK_EVERY = 50
"""Default K of ``--stop-check-every``: measured by benchmarks/stop_check_cost.py (docs/workload.md)."""


_TypeFn = TypeVar("_TypeFn", bound=Callable[[str], object])


def _named(name: str) -> Callable[[_TypeFn], _TypeFn]:
    """Give an argparse type function a readable name: argparse quotes it in its errors."""

    def rename(fn: _TypeFn) -> _TypeFn:
        fn.__name__ = name
        return fn

    return rename


@_named("positive int")
def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


@_named("non-negative int")
def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


@_named("float")
def finite_float(text: str) -> float:
    """argparse type: a finite float."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


@_named("positive float")
def positive_float(text: str) -> float:
    """argparse type: a finite float > 0."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


@_named("non-negative float")
def non_negative_float(text: str) -> float:
    """argparse type: a finite float >= 0."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


class OneLineParser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line on stderr (no usage block), exit status 2."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser(workload: "Workload") -> OneLineParser:
    """The command line of ``workload``'s script: the shared arguments plus the model's own."""
    p = OneLineParser(prog=workload.prog, description=workload.description)
    stop = p.add_argument_group("stop (exactly one of --steps/--duration-sec)")
    stop.add_argument("--steps", type=positive_int, default=None, help="timed steps per rank")
    stop.add_argument("--duration-sec", type=positive_float, default=None, help="timed seconds (lockstep stop)")
    stop.add_argument("--warmup-steps", type=non_negative_int, default=5, help="untimed steps before timing (default 5)")
    stop.add_argument("--stop-check-every", type=positive_int, default=DEFAULT_STOP_CHECK_EVERY,
                      help=f"duration mode: all-reduce the stop flag every K timed steps (default {DEFAULT_STOP_CHECK_EVERY})")
    stop.add_argument("--no-sync-stop", action="store_true",
                      help="duration mode: each rank stops on its own clock (reference behaviour; can hang)")

    model = p.add_argument_group("model and data")
    model.add_argument("--batch-size", type=positive_int, default=256, help="per-rank batch (samples)")
    workload.add_arguments(model)
    model.add_argument("--num-samples", type=positive_int, default=262144, help="synthetic dataset size (all ranks)")
    model.add_argument("--lr", type=positive_float, default=1e-3, help="AdamW learning rate")
    model.add_argument("--seed", type=int, default=42)
    model.add_argument("--loader", choices=LOADERS, default="synthetic",
                       help="synthetic: the stored samples in the training process; realistic: DataLoader workers, "
                            "pinned memory on CUDA, prefetching and the workload's per-sample transform")
    model.add_argument("--loader-workers", type=positive_int, default=2, help="realistic loader: worker processes per rank")
    model.add_argument("--prefetch-factor", type=positive_int, default=2, help="realistic loader: batches prefetched per worker")
    model.add_argument("--timing", choices=TIMINGS, default="step",
                       help="step: host clock at step boundaries only; phase: also data wait, h2d, forward, backward, "
                            "optimizer per step (CUDA: synchronize after each phase; intrusive)")
    model.add_argument("--host-sync", choices=HARNESS_HOST_SYNCS, default="none",
                       help="what a step makes the host wait for on the device: none (no sync in a timed step), loss "
                            "(the loss read after every step), seed (the seed script's loop: synchronize before every "
                            "step, the host-to-device copy inside the step marker, the loss read after every step)")
    model.add_argument("--gc", choices=GC_MODES, default="on",
                       help="Python's garbage collector in the timed loop: on (as Python does), freeze (gc.freeze() "
                            "before the timed loop), off (disabled for the timed loop)")

    run = p.add_argument_group("runtime")
    run.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    run.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    run.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16"), default="auto",
                     help="autocast dtype; auto = fp16 (+GradScaler) on CUDA, fp32 on CPU")
    run.add_argument("--threads", type=positive_int, default=None,
                     help="torch.set_num_threads per rank (default: torch's, i.e. OMP_NUM_THREADS when set)")
    run.add_argument("--collective-timeout-sec", type=positive_float, default=None,
                     help="process-group timeout, s (default: torch's)")
    run.add_argument("--log-every", type=non_negative_int, default=100, help="rank-0 progress line every N timed steps (0 = off)")
    run.add_argument("--metrics-dir", default=None, help="write rank-<rank>.json here")
    run.add_argument("--save-step-times", action="store_true", help="add step_times_ms to the rank JSON")
    run.add_argument("--gather-metrics", action="store_true",
                     help="after timing, rank 0 gathers every rank's record and writes all rank files "
                          "(nodes without a shared --metrics-dir)")
    run.add_argument("--traceml-mode", choices=("auto", "manual"), default=None,
                     help=f"TraceML init mode under traceml run (default: ${TRACEML_MODE_ENV} or auto)")

    fault = p.add_argument_group("fault and calibration knobs (off by default)")
    fault.add_argument("--fault-rank", type=non_negative_int, default=None, help="rank the faults apply to (default: all)")
    fault.add_argument("--fault-clock-skew-sec", type=finite_float, default=0.0, help="stop clock reads S s ahead")
    fault.add_argument("--fault-crash-at-step", type=positive_int, default=None, help="os._exit(3) at timed step N")
    fault.add_argument("--fault-hang-at-step", type=positive_int, default=None, help="sleep forever at timed step N")
    fault.add_argument("--inject-step-ms", type=non_negative_float, default=0.0, help="wait X ms in every timed step (sleep, spin the last 0.2 ms)")
    fault.add_argument("--inject-device-step-ms", type=non_negative_float, default=0.0,
                       help="queue X ms of GPU work in every timed step (a spin kernel sized at start-up; CUDA only)")
    fault.add_argument("--inject-startup-sec", type=non_negative_float, default=0.0, help="sleep X s before warmup")
    fault.add_argument("--inject-teardown-sec", type=non_negative_float, default=0.0, help="sleep X s after the timed loop")

    # --- tools beside TraceML: ddpbench.workload.tools ---
    tools = p.add_argument_group("in-process tools (off by default; docs/tools.md)")
    tools.add_argument("--torch-profiler", type=profiler_schedule, default=None, metavar="WAIT,WARMUP,ACTIVE,REPEAT",
                       help="run the loop under torch.profiler with this schedule, in steps (warmup steps count)")
    tools.add_argument("--torch-profiler-handler", choices=("tensorboard", "chrome"), default="tensorboard",
                       help="trace writer: tensorboard_trace_handler or export_chrome_trace (default tensorboard)")
    tools.add_argument("--wandb", action="store_true",
                       help="rank 0 logs loss and step time every step to a W&B run (WANDB_MODE from the environment)")
    tools.add_argument("--wandb-project", default="ddpbench", help="W&B project (default ddpbench)")
    tools.add_argument("--tool-dir", default=None, help=f"folder the tools write into (default ${TOOL_DIR_ENV})")

    # --- within-trial switching: ddpbench.workload.switching ---
    sw = p.add_argument_group("within-trial switching (off by default; docs/analysis.md)")
    sw.add_argument("--switch", choices=SWITCH_WHAT, default="none",
                    help="what the switch turns on and off (none: a no-op switch, the method's noise floor)")
    sw.add_argument("--switch-block-steps", type=non_negative_int, default=0,
                    help="timed steps per block, ABBA order (0 = no switching)")
    sw.add_argument("--switch-washout-steps", type=non_negative_int, default=0,
                    help="steps at the start of each block left out of its statistics")
    sw.add_argument("--switch-seed", type=int, default=0, help="seed of the first block's side")
    return p


@_named("schedule WAIT,WARMUP,ACTIVE,REPEAT")
def profiler_schedule(text: str) -> tuple[int, int, int, int]:
    """argparse type: torch.profiler's schedule as four integers (ACTIVE >= 1, the others >= 0)."""
    parts = [int(part) for part in text.split(",")]
    if len(parts) != 4 or min(parts) < 0 or parts[2] < 1:
        raise argparse.ArgumentTypeError(f"expected WAIT,WARMUP,ACTIVE,REPEAT (ACTIVE >= 1), got {text}")
    return parts[0], parts[1], parts[2], parts[3]


def env_world_size() -> int:
    """World size the launcher announced (``WORLD_SIZE``), 1 when run without torchrun."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def parse_args(workload: "Workload", argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and cross-check the arguments; any problem exits 2 with one line, before torch is touched."""
    parser = build_parser(workload)
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv and os.environ.get(ARGS_ENV):
        argv = [str(arg) for arg in json.loads(os.environ[ARGS_ENV])]
    args = parser.parse_args(argv)
    if (args.steps is None) == (args.duration_sec is None):
        parser.error("exactly one of --steps and --duration-sec is required")
    world = env_world_size()
    if args.num_samples < args.batch_size * world:
        parser.error(
            f"--num-samples {args.num_samples} is smaller than one global batch "
            f"(--batch-size {args.batch_size} x world size {world})"
        )
    if args.fault_rank is not None and args.fault_rank >= world:
        parser.error(f"--fault-rank {args.fault_rank} is outside the world (size {world})")
    if args.no_sync_stop and args.duration_sec is None:
        parser.error("--no-sync-stop only applies with --duration-sec")
    if args.inject_device_step_ms and args.device == "cpu":
        parser.error(f"--inject-device-step-ms {args.inject_device_step_ms:g} needs a CUDA device: a device-side wait "
                     "is a GPU kernel (use --inject-step-ms for a host wait)")
    problem = workload.check_arguments(args)
    if problem:
        parser.error(problem)
    if args.traceml_mode is None:
        env_mode = os.environ.get(TRACEML_MODE_ENV, "auto") or "auto"
        if env_mode not in ("auto", "manual"):
            parser.error(f"${TRACEML_MODE_ENV}={env_mode!r}: expected auto or manual")
        args.traceml_mode = env_mode
    args.tool_dir = args.tool_dir or os.environ.get(TOOL_DIR_ENV) or None
    if args.switch_block_steps and args.switch_washout_steps >= args.switch_block_steps:
        parser.error("--switch-washout-steps must be smaller than --switch-block-steps")
    if args.switch_block_steps and args.switch == "torch_profiler" and not args.torch_profiler:
        parser.error("--switch torch_profiler needs --torch-profiler")
    if args.switch_block_steps and args.switch == "wandb_log" and not args.wandb:
        parser.error("--switch wandb_log needs --wandb")
    if (args.torch_profiler or args.wandb) and not args.tool_dir:
        parser.error(f"--torch-profiler and --wandb need --tool-dir or ${TOOL_DIR_ENV}")
    return args
