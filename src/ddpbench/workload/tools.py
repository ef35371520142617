"""In-process tools beside TraceML, off unless asked for: torch.profiler on every rank (``--torch-profiler``), a W&B
run on rank 0 logging every step (``--wandb``; imported only then). docs/tools.md.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from pathlib import Path
from typing import Any, Callable, Optional

from ddpbench.choices import Device, SwitchWhat
from ddpbench.workload.args import RankArgs
from ddpbench.workload.runtime import Runtime
from ddpbench.workload.switching import Switch


@dataclasses.dataclass
class ToolHooks:
    """The active in-process tools of one rank and their per-step hook."""

    # a started torch.profiler.profile, or None
    profiler: Any = None
    # a wandb Run, or None
    run: Any = None
    # within-trial switching of torch.profiler: makes a profile (not started) for each on-block, else None
    new_profiler: Callable[[], Any] | None = None
    # the switch of the current timed step (None: no switching, or in warmup)
    switch: Switch | None = None
    # steps seen so far (warmup included): the W&B step index
    steps: int = 0
    # perf_counter() at the previous step's hook, s
    last: float = dataclasses.field(default_factory=time.perf_counter)

    def begin(self, step: int, switch: Switch) -> None:
        """Before timed step ``step`` under within-trial switching: start a recording at an on-block's first step."""
        self.switch = switch
        if self.new_profiler is not None and switch.on and self.profiler is None:
            self.profiler = self.new_profiler()
            self.profiler.start()

    def step(self, loss: Any, timed_step: int | None = None) -> None:
        """After one training step: log it to W&B (loss, step time), advance the profiler's schedule; under switching,
        log in on-blocks only (``wandb_log``), stop a recording at its on-block's last step (``torch_profiler``)."""
        now = time.perf_counter()
        switch = self.switch
        if self.run is not None and (switch is None or switch.on or switch.what != SwitchWhat.wandb_log):
            self.run.log({"loss": float(loss.item()), "step_time_ms": (now - self.last) * 1000.0}, step=self.steps)
        if self.new_profiler is not None:
            if self.profiler is not None and switch is not None and timed_step is not None \
                    and switch.last_of_block(timed_step):
                self.profiler.stop()
                self.profiler = None
        elif self.profiler is not None:
            self.profiler.step()
        self.steps += 1
        self.last = now

    def close(self) -> None:
        """Stop the profiler (a cycle still recording writes its trace) and finish the W&B run."""
        if self.profiler is not None:
            self.profiler.stop()
        if self.run is not None:
            self.run.finish()


def _profiler_maker(args: RankArgs[Any], rt: Runtime, tool_dir: Path, scheduled: bool) -> Callable[[], Any]:
    """A maker of torch.profiler profiles sharing one trace handler: on the ``--torch-profiler`` schedule, or
    (``scheduled`` False, within-trial switching) recording from start to stop."""
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if rt.device == Device.cuda else [])
    if args.torch_profiler_handler == "chrome":  # rank<r>.cycle<n>.json
        traces = itertools.count(1)

        def handler(prof: Any) -> None:
            tool_dir.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(tool_dir / f"rank{rt.rank}.cycle{next(traces)}.json"))
    else:
        handler = tensorboard_trace_handler(str(tool_dir), worker_name=f"rank{rt.rank}")
    assert args.torch_profiler is not None  # the caller makes profiles only when the schedule is given
    wait, warmup, active, repeat = args.torch_profiler
    cycles = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat) if scheduled else None
    return lambda: profile(activities=activities, schedule=cycles, on_trace_ready=handler)


def start_tools(args: RankArgs[Any], rt: Runtime) -> Optional[ToolHooks]:
    """Start the tools the arguments ask for on this rank; None when there are none."""
    tool_dir = Path(args.tool_dir) if args.tool_dir else None
    blocks = bool(args.switch_block_steps) and args.switch == SwitchWhat.torch_profiler
    maker = _profiler_maker(args, rt, tool_dir, not blocks) if args.torch_profiler and tool_dir else None
    profiler = maker() if maker is not None and not blocks else None
    if profiler is not None:
        profiler.start()
    run = None
    if args.wandb and rt.rank == 0 and tool_dir:
        import wandb

        tool_dir.mkdir(parents=True, exist_ok=True)
        config = {key: value for key, value in args.as_dict().items() if isinstance(value, (int, float, str, bool))}
        config["world_size"] = rt.world_size
        run = wandb.init(project=args.wandb_project, dir=str(tool_dir), config=config)
    if maker is None and run is None:
        return None
    return ToolHooks(profiler, run, maker if blocks else None)
