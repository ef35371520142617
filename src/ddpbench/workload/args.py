"""The rank's command line, one schema: :class:`RankArgs` owns every argument of a built-in workload, its default
and its choices; the trial renders one (:func:`ddpbench.workload.flags.render`), the rank parses one
(:func:`parse_args`: before torch, bad input is one line and exit status 2). docs/workload.md has the table.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Dict, Generic, Optional, Sequence, Tuple, TypeVar, cast

from ddpbench.choices import (Device, DistBackend, GcMode, HostSyncPattern, Loader, Precision, ProfilerHandler,
                              SwitchWhat, Timing)
from ddpbench.formats.rank_loop import HARNESS_HOST_SYNCS
from ddpbench.workload.flags import (OneLineParser, add_flags, finite_float, flag, non_negative_float,
                                     non_negative_int, positive_float, positive_int, profiler_schedule,
                                     values_of)
from ddpbench.workload.sizes import Sizes

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

S = TypeVar("S", bound=Sizes)


@dataclasses.dataclass(frozen=True)
class RankArgs(Generic[S]):
    """Every argument of a built-in workload's rank: the stop rule, the model's data, the runtime, the fault and
    calibration knobs, the in-process tools and within-trial switching, and the workload's own ``sizes``."""

    # the workload's own size arguments
    sizes: S
    # --- stop: exactly one of steps and duration_sec ---
    steps: Optional[int] = flag(None, "timed steps per rank", parse=positive_int)
    duration_sec: Optional[float] = flag(None, "timed seconds (lockstep stop)", parse=positive_float)
    warmup_steps: int = flag(5, "untimed steps before timing", parse=non_negative_int)
    stop_check_every: int = flag(DEFAULT_STOP_CHECK_EVERY, "duration mode: all-reduce the stop flag every K timed "
                                 "steps", parse=positive_int)
    no_sync_stop: bool = flag(False, "duration mode: each rank stops on its own clock (reference behaviour; can hang)")
    # --- model and data ---
    batch_size: int = flag(256, "per-rank batch (samples)", parse=positive_int)
    num_samples: int = flag(262144, "synthetic dataset size (all ranks)", parse=positive_int)
    lr: float = flag(1e-3, "AdamW learning rate", parse=positive_float)
    seed: int = flag(42, "model init, data, sampler shuffle", parse=int)
    loader: Loader = flag(Loader.synthetic, "synthetic: the stored samples in the training process; realistic: "
                          "DataLoader workers, pinned memory on CUDA, prefetching and the workload's per-sample "
                          "transform", choices=tuple(Loader))
    loader_workers: int = flag(2, "realistic loader: worker processes per rank", parse=positive_int)
    prefetch_factor: int = flag(2, "realistic loader: batches prefetched per worker", parse=positive_int)
    timing: Timing = flag(Timing.step, "step: host clock at step boundaries only; phase: also data wait, h2d, "
                          "forward, backward, optimizer per step (CUDA: synchronize after each phase; intrusive)",
                          choices=tuple(Timing))
    host_sync: HostSyncPattern = flag(
        HostSyncPattern.none, "what a step makes the host wait for on the device: none (no sync in a timed step), "
        "loss (the loss read after every step), seed (the seed script's loop: synchronize before every step, the "
        "host-to-device copy inside the step marker, the loss read after every step)",
        choices=HARNESS_HOST_SYNCS)
    gc: GcMode = flag(GcMode.on, "Python's garbage collector in the timed loop: on (as Python does), freeze "
                      "(gc.freeze() before the timed loop), off (disabled for the timed loop)", choices=tuple(GcMode))
    # --- runtime ---
    device: Device = flag(Device.auto, "auto: cuda where available", choices=tuple(Device))
    backend: DistBackend = flag(DistBackend.auto, "auto: nccl on cuda, else gloo", choices=tuple(DistBackend))
    precision: Precision = flag(Precision.fp32, "autocast dtype (fp16: with a GradScaler on CUDA)",
                                choices=tuple(Precision))
    threads: Optional[int] = flag(None, "torch.set_num_threads per rank (default: torch's, i.e. OMP_NUM_THREADS "
                                  "when set)", parse=positive_int)
    collective_timeout_sec: Optional[float] = flag(None, "process-group timeout, s (default: torch's)",
                                                   parse=positive_float)
    log_every: int = flag(100, "rank-0 progress line every N timed steps (0 = off)", parse=non_negative_int)
    metrics_dir: Optional[str] = flag(None, "write rank-<rank>.json here")
    save_step_times: bool = flag(False, "add step_times_ms to the rank JSON")
    gather_metrics: bool = flag(False, "after timing, rank 0 gathers every rank's record and writes all rank files "
                                "(nodes without a shared --metrics-dir)")
    traceml_mode: Optional[str] = flag(None, f"TraceML init mode under traceml run (default: ${TRACEML_MODE_ENV} or "
                                       "auto)", choices=("auto", "manual"))
    # --- fault and calibration knobs (off by default) ---
    fault_rank: Optional[int] = flag(None, "rank the faults apply to (default: all)", parse=non_negative_int)
    fault_clock_skew_sec: float = flag(0.0, "stop clock reads S s ahead", parse=finite_float)
    fault_crash_at_step: Optional[int] = flag(None, "os._exit(3) at timed step N", parse=positive_int)
    fault_hang_at_step: Optional[int] = flag(None, "sleep forever at timed step N", parse=positive_int)
    inject_step_ms: float = flag(0.0, "wait X ms in every timed step (sleep, spin the last 0.2 ms)",
                                 parse=non_negative_float)
    inject_device_step_ms: float = flag(0.0, "queue X ms of GPU work in every timed step (a spin kernel sized at "
                                        "start-up; CUDA only)", parse=non_negative_float)
    inject_startup_sec: float = flag(0.0, "sleep X s before warmup", parse=non_negative_float)
    inject_teardown_sec: float = flag(0.0, "sleep X s after the timed loop", parse=non_negative_float)
    inject_side_cpu: float = flag(0.0, "local rank 0: start a side process that spins at X of one core (0 to 1)",
                                  parse=non_negative_float)
    inject_side_mb: float = flag(0.0, "local rank 0: the side process holds X MiB resident", parse=non_negative_float)
    # --- in-process tools (off by default; docs/tools.md) ---
    torch_profiler: Optional[Tuple[int, int, int, int]] = flag(
        None, "run the loop under torch.profiler with this schedule, in steps (warmup steps count)",
        parse=profiler_schedule, metavar="WAIT,WARMUP,ACTIVE,REPEAT")
    torch_profiler_handler: ProfilerHandler = flag(ProfilerHandler.tensorboard, "trace writer: tensorboard_trace_"
                                                   "handler or export_chrome_trace", choices=tuple(ProfilerHandler))
    wandb: bool = flag(False, "rank 0 logs loss and step time every step to a W&B run (WANDB_MODE from the "
                       "environment)")
    wandb_project: str = flag("ddpbench", "W&B project")
    tool_dir: Optional[str] = flag(None, f"folder the tools write into (default ${TOOL_DIR_ENV})")
    # --- within-trial switching (off by default; docs/analysis.md) ---
    switch: SwitchWhat = flag(SwitchWhat.none, "what the switch turns on and off (none: a no-op switch, the "
                              "method's noise floor)", choices=tuple(SwitchWhat))
    switch_block_steps: int = flag(0, "timed steps per block, ABBA order (0 = no switching)", parse=non_negative_int)
    switch_washout_steps: int = flag(0, "steps at the start of each block left out of its statistics",
                                     parse=non_negative_int)
    switch_seed: int = flag(0, "seed of the first block's side", parse=int)

    def as_dict(self) -> Dict[str, Any]:
        """Every argument by its field name, the sizes' among them, as JSON values (the rank record's ``args``)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "sizes"}
        values.update(dataclasses.asdict(self.sizes))
        return {key: list(value) if isinstance(value, tuple) else value for key, value in values.items()}


def _problem(args: RankArgs[S], world: int) -> Optional[str]:
    """What is wrong with ``args`` together (each flag alone parsed), or None."""
    if (args.steps is None) == (args.duration_sec is None):
        return "exactly one of --steps and --duration-sec is required"
    if args.num_samples < args.batch_size * world:
        return (f"--num-samples {args.num_samples} is smaller than one global batch (--batch-size {args.batch_size} "
                f"x world size {world})")
    if args.fault_rank is not None and args.fault_rank >= world:
        return f"--fault-rank {args.fault_rank} is outside the world (size {world})"
    if args.no_sync_stop and args.duration_sec is None:
        return "--no-sync-stop only applies with --duration-sec"
    if args.inject_side_cpu > 1:
        return f"--inject-side-cpu {args.inject_side_cpu:g} is more than one core (0 to 1)"
    if args.inject_device_step_ms and args.device == Device.cpu:
        return (f"--inject-device-step-ms {args.inject_device_step_ms:g} needs a CUDA device: a device-side wait is a "
                "GPU kernel (use --inject-step-ms for a host wait)")
    if args.switch_block_steps and args.switch_washout_steps >= args.switch_block_steps:
        return "--switch-washout-steps must be smaller than --switch-block-steps"
    if args.switch_block_steps and args.switch == SwitchWhat.torch_profiler and not args.torch_profiler:
        return "--switch torch_profiler needs --torch-profiler"
    if args.switch_block_steps and args.switch == SwitchWhat.wandb_log and not args.wandb:
        return "--switch wandb_log needs --wandb"
    if (args.torch_profiler or args.wandb) and not args.tool_dir:
        return f"--torch-profiler and --wandb need --tool-dir or ${TOOL_DIR_ENV}"
    return None


def parse_args(workload: "Workload[S]", argv: Sequence[str] | None = None) -> RankArgs[S]:
    """``workload``'s rank arguments from ``argv`` (default: the command line, else ``$DDPBENCH_WORKLOAD_ARGS``),
    cross-checked; any problem exits 2 with one line, before torch is touched."""
    parser = OneLineParser(prog=workload.prog, description=workload.description)
    add_flags(parser.add_argument_group("shared by every workload (docs/workload.md)"), RankArgs, skip=("sizes",))
    add_flags(parser.add_argument_group("the model's size"), workload.sizes)
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv and os.environ.get(ARGS_ENV):
        argv = [str(arg) for arg in json.loads(os.environ[ARGS_ENV])]
    parsed = parser.parse_args(argv)
    env_mode = os.environ.get(TRACEML_MODE_ENV, "auto") or "auto"
    if parsed.traceml_mode is None and env_mode not in ("auto", "manual"):
        parser.error(f"${TRACEML_MODE_ENV}={env_mode!r}: expected auto or manual")
    sizes = cast(S, workload.sizes(**values_of(workload.sizes, parsed)))
    args: RankArgs[S] = RankArgs(sizes=sizes, **{
        **values_of(RankArgs, parsed, skip=("sizes",)), "traceml_mode": parsed.traceml_mode or env_mode,
        "tool_dir": parsed.tool_dir or os.environ.get(TOOL_DIR_ENV) or None})
    try:  # the world size the launcher announced, 1 without torchrun
        world = max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        world = 1
    problem = _problem(args, world) or workload.check_arguments(args)
    if problem:
        parser.error(problem)
    return args
