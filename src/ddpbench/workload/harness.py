"""The workload harness: runs any :class:`~ddpbench.workload.base.Workload` the same way on a rank (docs/workload.md):
parse the arguments (before torch), pin the rank, set up its process groups, ``traceml_ai.init`` under ``traceml
run``, build the model and the loader, warm up, run the timed loop, write the rank record."""

from __future__ import annotations

import gc
import os
import signal
import time
from typing import Any, Mapping, Sequence

from ddpbench.choices import Device
from ddpbench.formats.rank_loop import STARTUP_PARTS
from ddpbench.workload import side_load
from ddpbench.workload.affinity import current_cpus, pin_from_environment
from ddpbench.workload.args import RankArgs, parse_args
from ddpbench.workload.base import Workload
from ddpbench.workload.data import build_loader, endless_batches, loader_description
from ddpbench.workload.device_time import DeviceWait, cycles_per_ms
from ddpbench.workload.flags import OneLineParser
from ddpbench.workload.lifetime import signal_on_parent_death
from ddpbench.workload.loop import Trainer, run_timed, run_warmup
from ddpbench.workload.record import build_record, gather_records, write_record
from ddpbench.workload.runtime import Runtime, TraceStep, ensure_single_process_env, init_process_group, init_traceml
from ddpbench.workload.stop import Faults, StopRule
from ddpbench.workload.switching import switch_from_args
from ddpbench.workload.tools import start_tools


class StartupClock:
    """Seconds of each start-up part of this rank (:data:`~ddpbench.formats.rank_loop.STARTUP_PARTS`), from its first
    statement to its first timed step: each :meth:`mark` gives its part the time since the previous mark."""

    def __init__(self, process_start_epoch: float) -> None:
        # the end of the previous part, epoch s
        self.last = process_start_epoch
        # part -> s so far
        self.parts = dict.fromkeys(STARTUP_PARTS, 0.0)

    def mark(self, part: str, now: float | None = None) -> None:
        """``part`` ends now (or at epoch ``now``): it gets the time since the previous mark."""
        now = time.time() if now is None else now
        self.parts[part] += max(0.0, now - self.last)
        self.last = max(self.last, now)

    def record(self) -> dict[str, float]:
        """The rank record's ``startup_s``."""
        return dict(self.parts)


def run(workload: Workload[Any], argv: Sequence[str] | None = None, *, process_start_epoch: float | None = None) -> int:
    """Parse, train, record ``workload`` on this rank; the process exit status (0 on success). ``process_start_epoch``:
    the ``time.time()`` of the script's first statement (``timestamps.process_start``)."""
    started = time.time() if process_start_epoch is None else process_start_epoch
    signal_on_parent_death(signal.SIGKILL)  # a rank whose launcher is gone could only hang in its next collective
    args = parse_args(workload, argv)
    try:
        pin_from_environment()  # before torch starts its threads
    except (ValueError, OSError) as exc:
        OneLineParser(prog=workload.prog).error(f"CPU affinity: {exc}")
    ensure_single_process_env()
    startup = StartupClock(started)
    startup.mark("script")
    import torch  # noqa: F401  (here, so that its import is a start-up part of its own)

    startup.mark("torch_import")
    trace_step = init_traceml(args)  # before the DataLoader exists, so auto mode can patch it
    startup.mark("tool_init")
    return train(workload, args, trace_step, process_start_epoch=started, startup=startup)


def train(
    workload: Workload[Any], args: RankArgs[Any], trace_step: TraceStep | None, *, process_start_epoch: float,
    extra_record: Mapping[str, Any] | None = None, startup: StartupClock | None = None,
) -> int:
    """Every step of :func:`run` after TraceML's init; 0. Creates the default process group unless the launcher made
    it (Ray Train), and destroys only one it created. ``extra_record``: fields added to the rank record; ``startup``:
    :func:`run`'s clock (else one started here)."""
    if startup is None:
        startup = StartupClock(process_start_epoch)
        startup.mark("script")
    import torch
    import torch.distributed as dist

    startup.mark("torch_import")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        rt = Runtime(args.device, args.backend, args.precision)
        if args.inject_device_step_ms > 0 and rt.device != Device.cuda:
            raise ValueError(f"--inject-device-step-ms {args.inject_device_step_ms:g}: a device-side wait is a GPU "
                             f"kernel; this rank runs on {rt.device} (use --inject-step-ms for a host wait)")
        rt.init_device()
    except ValueError as exc:
        OneLineParser(prog=workload.prog).error(str(exc))
    startup.mark("device_init")
    own_group = not dist.is_initialized()
    stop_group = init_process_group(args, rt)
    pg_ready = time.time()
    startup.mark("process_group", pg_ready)

    trainer = Trainer(workload, args, rt, trace_step)
    startup.mark("model")
    loader, sampler = build_loader(args, rt, workload.build_dataset(args), workload.sample_transform(args))
    batches = endless_batches(loader, sampler)
    startup.mark("data")
    if args.inject_startup_sec:
        time.sleep(args.inject_startup_sec)
    side = None  # the injected side process: ends with this rank
    if (args.inject_side_cpu or args.inject_side_mb) and rt.local_rank == 0:
        report = os.path.join(args.metrics_dir, side_load.report_name(rt.node_rank)) if args.metrics_dir else None
        side = side_load.start(args.inject_side_cpu, args.inject_side_mb, report)
    startup.mark("injected")
    tools = start_tools(args, rt)  # torch.profiler / W&B when asked for
    startup.mark("tools")
    run_warmup(trainer, batches, args.warmup_steps, tools)
    startup.mark("warmup")
    if args.inject_device_step_ms > 0:  # sized now, with the GPU warm
        trainer.device_wait = DeviceWait(args.inject_device_step_ms, cycles_per_ms())
    startup.mark("injected")
    stop = StopRule(args, rt.rank, stop_group)
    switch = switch_from_args(args)  # within-trial switching, when asked for
    res = run_timed(args, rt, trainer, batches, stop, Faults(args, rt.rank), tools, switch)
    startup.mark("warmup", res.first_step_start_epoch)
    if tools is not None:
        tools.close()

    if args.inject_teardown_sec:
        time.sleep(args.inject_teardown_sec)
    if rt.rank == 0:
        n = len(res.durations_s)
        elapsed = res.last_step_end_epoch - res.first_step_start_epoch
        print(f"Done. steps={n} elapsed_s={elapsed:.3f} steps_per_s={n / elapsed if elapsed > 0 else 0.0:.3f}", flush=True)
    if args.metrics_dir:
        record = build_record(
            args, rt, res, workload=workload.name, data=loader_description(args, rt),
            process_start_epoch=process_start_epoch, pg_ready_epoch=pg_ready,
            traceml_active=trace_step is not None, stop_reason=stop.reason, startup=startup.record(),
            device_wait=trainer.device_wait,
        )
        if switch is not None:
            record["switching"], record["blocks"] = switch.settings(), switch.blocks(res.durations_s)
        cpus = current_cpus()
        if cpus is not None:
            record["cpu_affinity"] = cpus
        record.update(extra_record or {})
        write_record(args.metrics_dir, record)
        if args.gather_metrics:
            gather_records(record, rt, args.metrics_dir, stop_group)
    del side  # not stopped here: it ends when this rank does (the footprint then sees it whole)
    # the DDP model goes before the group: its reducer holds the group, and freed later, its gloo threads can
    # outlive a peer's closed pair and the rank dies with SIGABRT (docs/workload.md)
    del trainer.model
    gc.collect()
    dist.barrier(group=stop_group)
    if own_group:
        dist.destroy_process_group()
    return 0
