"""The closed choices of ddpbench's config, rank command line and records: one Enum each, spelled once.

Every member is a ``str`` equal to its value (``Role.tool == "tool"``) that hashes, prints, formats, reprs and
serialises to JSON as that value, and is named by it, so YAML and Hydra overrides give a member by name
(``mode.role=tool``), as OmegaConf's Enum fields read it. This module imports nothing of ddpbench: config,
workload, formats and analysis all import it.
"""

from enum import Enum


class Choice(str, Enum):
    """A closed choice: a ``str`` that prints, formats and reprs as its value (``f"{Role.tool!r}"`` is ``'tool'``),
    so every message that shows a config value shows it as the user wrote it."""

    def __str__(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


class Role(Choice):
    """What a mode is to the analysis (``mode.role``)."""

    # compared against
    baseline = "baseline"
    # judged against the budget
    tool = "tool"
    # the baseline again: the noise floor
    aa = "aa"
    # known injected costs
    calibration = "calibration"


class StopKind(Choice):
    """When a trial's timed loop ends (``stop.kind``)."""

    # a fixed number of timed steps: wall time sees the per-step cost
    steps = "steps"
    # a fixed time, every rank stopping at the same step (lockstep)
    duration = "duration"


class Timing(Choice):
    """What the timed loop measures (``timing``)."""

    # the host clock at step boundaries (quote this)
    step = "step"
    # per-phase times, a device synchronisation after each phase
    phase = "phase"


class Device(Choice):
    """Where the ranks train (``cluster.device``)."""

    # cuda where a GPU is visible, else cpu
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class DistBackend(Choice):
    """The torch.distributed backend (``cluster.backend``)."""

    # nccl on cuda, else gloo
    auto = "auto"
    gloo = "gloo"
    nccl = "nccl"


class Precision(Choice):
    """The numeric precision of the training step (``cluster.precision``; fp16 and bf16 under autocast)."""

    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


class HostSyncPattern(Choice):
    """What a training step makes the host wait for on the device (``workload.host_sync``; docs/workload.md)."""

    # ddpbench's sync-free loop
    none = "none"
    # the loss read to the host after every step
    loss = "loss"
    # the seed script's loop: a synchronize before every step, the copy inside the step marker, the loss read
    seed = "seed"
    # a framework Trainer's or a user script's own loop (not a pattern of ddpbench's loop)
    own = "own"


class GcMode(Choice):
    """Python's garbage collector in ddpbench's timed loop (``workload.gc``)."""

    # as Python does
    on = "on"
    # gc.freeze() before the timed loop: start-up's objects are not scanned again
    freeze = "freeze"
    # disabled in the loop
    off = "off"


class Loader(Choice):
    """How the workload serves batches (``data.loader``)."""

    # stored samples, no workers
    synthetic = "synthetic"
    # workers, a per-sample transform, pinned memory on CUDA, prefetching
    realistic = "realistic"


class SwitchingKind(Choice):
    """Within-trial switching of the tool's per-step work (``switching.kind``)."""

    none = "none"
    # the mode's switch off and on every switching.block_steps timed steps
    blocks = "blocks"
    # blocks where the mode declares a switch and ddpbench's own loop runs the workload, else none
    auto = "auto"


class SwitchWhat(Choice):
    """What a mode's switch turns off and on (``mode.switch.what``)."""

    # a no-op switch: the method's noise floor
    none = "none"
    # TraceML's step wrapping and TRACEML_DISABLED
    trace_step = "trace_step"
    # an active torch.profiler recording
    torch_profiler = "torch_profiler"
    # the per-step W&B log call
    wandb_log = "wandb_log"
    # the injected wait
    inject = "inject"


class ProfilerHandler(Choice):
    """Where torch.profiler's traces go (``tool.torch_profiler.handler``)."""

    # tensorboard_trace_handler: rank<r>.<time>.pt.trace.json
    tensorboard = "tensorboard"
    # export_chrome_trace
    chrome = "chrome"


class ArtifactKind(Choice):
    """The tool output a mode must leave for its trial to count (``mode.artifacts.kind``; docs/tools.md)."""

    traceml_summary = "traceml_summary"
    torch_trace = "torch_trace"
    speedscope = "speedscope"
    wandb_offline = "wandb_offline"


class Spending(Choice):
    """How ``repeat=auto`` spreads its error rate over the looks (``precision.spending``)."""

    # decides early
    pocock = "pocock"
    obrien_fleming = "obrien_fleming"


class Disturbed(Choice):
    """What ``repeat=auto`` does with a pair whose trials' load shows other work disturbed it (``precision.disturbed``)."""

    # not counted: the next repeat takes its place
    rerun = "rerun"
    # counted like any other (the member shadows str.count, which no caller uses)
    count = "count"  # type: ignore[assignment]
