"""What a trial trains and how its timed loop ends: the workload, its sizes and data, the stop rule, and the
costs and faults a test or a calibration puts in (model.*, workload.*, data.*, stop.*, inject.*, fault.*)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass
from typing import TYPE_CHECKING, Any, Dict, Optional, cast, get_type_hints

from omegaconf import MISSING

from ddpbench.choices import GcMode, HostSyncPattern, Loader, StopKind
from ddpbench.workload.sizes import ConvnetSizes, MlpSizes, Sizes, TransformerSizes


def _thawed(sizes: type[Sizes], name: str, doc: str, leave_out: tuple[str, ...] = ()) -> Any:
    """A workload's frozen size arguments (``ddpbench.workload.sizes``: names, types, defaults, meaning) as the
    mutable dataclass a structured config needs."""
    types = get_type_hints(sizes)
    thawed = make_dataclass(name, [(f.name, types[f.name], field(default=f.default)) for f in fields(sizes)
                                   if f.name not in leave_out])
    thawed.__module__, thawed.__doc__ = __name__, doc
    return thawed


if TYPE_CHECKING:  # what a type checker sees: the same fields as the rank's
    TransformerSizeConfig = TransformerSizes
    ConvnetSizeConfig = ConvnetSizes
else:
    TransformerSizeConfig = _thawed(TransformerSizes, "TransformerSizeConfig",
                                    "Size of the transformer workload (model.transformer).")
    ConvnetSizeConfig = _thawed(ConvnetSizes, "ConvnetSizeConfig",
                                "Size of the convnet workload (model.convnet); its classes are model.num_classes.",
                                leave_out=("num_classes",))


@dataclass
class ModelConfig:
    """Size of the DDP MLP workload."""

    # batch size per rank, samples
    batch_size: int = 64
    # the MLP's sizes (their meaning and defaults: ddpbench.workload.sizes.MlpSizes); num_classes: the convnet's too
    input_dim: int = MlpSizes.input_dim
    hidden_dim: int = MlpSizes.hidden_dim
    hidden_layers: int = MlpSizes.hidden_layers
    num_classes: int = MlpSizes.num_classes
    # synthetic dataset size, samples (at least one global batch)
    num_samples: int = 65536
    # AdamW learning rate
    lr: float = 1e-3
    # the host-sync pattern of this size's reference job, which workload.host_sync follows unless set
    host_sync: HostSyncPattern = HostSyncPattern.none
    # workload=transformer sizes
    transformer: TransformerSizeConfig = field(default_factory=TransformerSizeConfig)
    # workload=convnet sizes
    convnet: ConvnetSizeConfig = field(default_factory=ConvnetSizeConfig)


@dataclass
class WorkloadConfig:
    """Which training script every mode runs (conf/workload/*.yaml)."""

    # label written into the rank records (mlp, transformer, convnet)
    name: str = MISSING
    # script run by path: relative to the ddpbench.workload package, or absolute
    script: str = MISSING
    # the script's model-size arguments, --<key>=<value> (values interpolate the model group)
    size_args: Dict[str, Any] = field(default_factory=dict)
    # workload=script: the user's own script, relative to where ddpbench runs (null = built-in)
    path: Optional[str] = None
    # workload=script: the script's own arguments, a list or one string split as a shell would
    args: Any = field(default_factory=list)
    # any workload: figure name -> regex with one capture group, read from rank 0's stdout (last match wins)
    metrics: Dict[str, str] = field(default_factory=dict)
    # unit of a figure in `metrics`, e.g. tokens_per_s: tokens/s (optional)
    units: Dict[str, str] = field(default_factory=dict)
    # workload=script: the script writes its rank record through ddpbench.workload.recorder; null = on when it
    # imports a framework (transformers, lightning), whose Trainer the recorder attaches to
    records: Optional[bool] = None
    # --- framework jobs ---
    # a built-in workload trained by a framework Trainer (transformers, lightning); null = the harness's own loop
    framework: Optional[str] = None
    # --- Ray Train ---
    # workload=ray_train: the built-in model each Ray Train worker trains (docs/ray.md); null = not Ray Train
    trains: Optional[str] = None
    # workload=ray_train: each built-in model's size arguments; size_args picks the one `trains` names
    model_sizes: Dict[str, Any] = field(default_factory=dict)
    # --- the job's loop ---
    # what a training step makes the host wait for on the device (own: hf_trainer, lightning, script); default:
    # the model size's (model=seed_e2e: seed)
    host_sync: HostSyncPattern = cast(HostSyncPattern, "${model.host_sync}")
    # Python's garbage collector in ddpbench's timed loop, every mode alike
    gc: GcMode = GcMode.on


@dataclass
class DataConfig:
    """How the workload serves batches."""

    loader: Loader = Loader.synthetic
    # realistic loader: DataLoader worker processes per rank
    workers: int = 2
    # realistic loader: batches prefetched per worker
    prefetch_factor: int = 2


@dataclass
class StopConfig:
    """When a trial's timed loop ends."""

    kind: StopKind = StopKind.steps
    # timed steps per rank, for kind=steps
    steps: Optional[int] = 200
    # seconds of timed training, for kind=duration
    duration_sec: Optional[float] = None
    # untimed steps before the timed loop
    warmup_steps: int = 10
    # duration stop: ranks agree on stopping every this many steps (all-reduce MAX; its cost: docs/workload.md)
    check_every: int = 50
    # duration stop: true = lockstep (the fix); false = the reference's per-rank clock (hangs)
    sync: bool = True
    # framework scripts: true = keep the Trainer's own max_steps; false = ddpbench sets warmup + stop.steps
    from_script: bool = False


@dataclass
class InjectConfig:
    """Known costs the calibration modes add (`inject`: host side, `inject_device`: device side); others ignore them."""

    # mode=inject: wall time the host waits in every timed step on every rank (sleep, spin the last 0.2 ms), ms
    step_ms: float = 2.0
    # mode=inject_device: GPU time queued in every timed step on every rank (a spin kernel), ms; CUDA only
    device_step_ms: float = 2.0
    # sleep before the process group is created, s
    startup_s: float = 1.0
    # sleep after the timed loop, before exit, s
    teardown_s: float = 0.5
    # mode=inject: a side process on every node (started by its local rank 0) that spins at this fraction of one core
    # (0 to 1; 0 = none), the footprint's known answer
    side_cpu: float = 0.0
    # ... and holds this many MiB resident (0 = none)
    side_mb: float = 0.0


@dataclass
class FaultConfig:
    """Fault knobs for reliability tests; off by default and applied the same in every mode."""

    # timed step at which the targeted rank(s) crash (null = off)
    crash_at_step: Optional[int] = None
    # timed step at which the targeted rank(s) hang (null = off)
    hang_at_step: Optional[int] = None
    # seconds the targeted rank's stop clock runs ahead (0 = off)
    clock_skew_sec: float = 0.0
    # global rank the fault applies to (null = every rank)
    rank: Optional[int] = None
