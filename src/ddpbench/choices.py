"""The closed choices of ddpbench's config, rank command line and records: one Enum each, spelled once.

Every member is a ``str`` equal to its value, named by it (YAML and overrides give it by name, as OmegaConf reads
Enum fields), that hashes, prints, reprs and serialises to JSON as that value. Imports nothing of ddpbench.
"""

from enum import Enum


class Choice(str, Enum):
    """A closed choice that prints and reprs as its value, so a message shows a config value as the user wrote it."""

    def __str__(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


class Role(Choice):
    """What a mode is to the analysis (``mode.role``)."""

    baseline = "baseline"  # compared against
    tool = "tool"  # judged against the budget
    aa = "aa"  # the baseline again: the noise floor
    calibration = "calibration"  # known injected costs


class StopKind(Choice):
    """When a trial's timed loop ends (``stop.kind``)."""

    steps = "steps"  # a fixed number of timed steps: wall time sees the per-step cost
    duration = "duration"  # a fixed time, every rank stopping at the same step (lockstep)


class Timing(Choice):
    """What the timed loop measures (``timing``)."""

    step = "step"  # the host clock at step boundaries (quote this)
    phase = "phase"  # per-phase times, a device synchronisation after each phase


class Device(Choice):
    """Where the ranks train (``cluster.device``)."""

    auto = "auto"  # cuda where a GPU is visible, else cpu
    cpu = "cpu"
    cuda = "cuda"


class DistBackend(Choice):
    """The torch.distributed backend (``cluster.backend``)."""

    auto = "auto"  # nccl on cuda, else gloo
    gloo = "gloo"
    nccl = "nccl"

    def on(self, device: "Device | str") -> "DistBackend":
        """This backend on ``device``: ``auto`` is nccl on cuda and gloo on cpu (and stays auto on an auto device,
        which only the rank resolves); any other backend is itself."""
        if self is not DistBackend.auto or device == Device.auto:
            return self
        return DistBackend.nccl if device == Device.cuda else DistBackend.gloo


class CpuAffinity(Choice):
    """``cluster.cpu_affinity`` when it is not a CPU list (ddpbench.workload.affinity)."""

    auto = "auto"  # each host's ranks planned from its CPUs, the driver and agents apart
    none = "none"  # no pinning


class Precision(Choice):
    """The numeric precision of the training step (``cluster.precision``; fp16 and bf16 under autocast)."""

    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


class HostSyncPattern(Choice):
    """What a training step makes the host wait for on the device (``workload.host_sync``; each pattern in words:
    ``ddpbench.formats.rank_loop.HOST_SYNC_TEXT``, docs/workload.md)."""

    none = "none"
    loss = "loss"
    seed = "seed"
    own = "own"


class GcMode(Choice):
    """Python's garbage collector in ddpbench's timed loop (``workload.gc``)."""

    on = "on"  # as Python does
    freeze = "freeze"  # gc.freeze() before the timed loop: start-up's objects are not scanned again
    off = "off"  # disabled in the loop


class Loader(Choice):
    """How the workload serves batches (``data.loader``)."""

    synthetic = "synthetic"  # stored samples, no workers
    realistic = "realistic"  # workers, a per-sample transform, pinned memory on CUDA, prefetching


class SwitchingKind(Choice):
    """Within-trial switching of the tool's per-step work (``switching.kind``)."""

    none = "none"
    blocks = "blocks"  # the mode's switch off and on every switching.block_steps timed steps
    auto = "auto"  # blocks where the mode declares a switch and ddpbench's own loop runs the workload, else none


class SwitchWhat(Choice):
    """What a mode's switch turns off and on (``mode.switch.what``)."""

    none = "none"  # a no-op switch: the method's noise floor
    trace_step = "trace_step"  # TraceML's step wrapping and TRACEML_DISABLED
    torch_profiler = "torch_profiler"  # an active torch.profiler recording
    wandb_log = "wandb_log"  # the per-step W&B log call
    inject = "inject"  # the injected wait


class ProfilerHandler(Choice):
    """Where torch.profiler's traces go (``tool.torch_profiler.handler``)."""

    tensorboard = "tensorboard"  # tensorboard_trace_handler: rank<r>.<time>.pt.trace.json
    chrome = "chrome"  # export_chrome_trace


class ArtifactKind(Choice):
    """The tool output a mode must leave for its trial to count (``mode.artifacts.kind``; docs/tools.md)."""

    traceml_summary = "traceml_summary"
    torch_trace = "torch_trace"
    speedscope = "speedscope"
    wandb_offline = "wandb_offline"


class Spending(Choice):
    """How ``repeat=auto`` spreads its error rate over the looks (``precision.spending``)."""

    pocock = "pocock"  # decides early
    obrien_fleming = "obrien_fleming"


class Disturbed(Choice):
    """What ``repeat=auto`` does with a pair whose trials' load shows other work disturbed it (``precision.disturbed``)."""

    rerun = "rerun"  # not counted: the next repeat takes its place
    # counted like any other (the member shadows str.count, which no caller uses)
    count = "count"  # type: ignore[assignment]


class TrialStatus(Choice):
    """How a trial ended (the trial record's ``status``): only an ``ok`` trial's figures count."""

    ok = "ok"
    failed = "failed"  # a node or rank failed, a record or a figure the trial needs is missing
    timeout = "timeout"  # killed at the trial's timeout


class Verdict(Choice):
    """A cost's interval against a limit (the overhead budget, or a regression threshold between two versions)."""

    within = "within"  # wholly below the limit
    over = "over"  # wholly above it
    inconclusive = "inconclusive"  # neither, or no interval
