"""What a trial trains and how its timed loop ends: the workload, its sizes and data, the stop rule, and the
costs and faults a test or a calibration puts in (model.*, workload.*, data.*, stop.*, inject.*, fault.*)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, cast

from omegaconf import MISSING

from ddpbench.choices import GcMode, HostSyncPattern, Loader, StopKind
from ddpbench.workload.sizes import ConvnetSizes, MlpSizes, TransformerSizes


@dataclass
class TransformerSizeConfig:
    """Size of the transformer workload (model.transformer); the defaults are the rank's (workload.sizes)."""

    # embedding width
    d_model: int = TransformerSizes.d_model
    # transformer blocks
    layers: int = TransformerSizes.layers
    # attention heads; must divide d_model
    heads: int = TransformerSizes.heads
    # tokens per sample
    seq_len: int = TransformerSizes.seq_len
    # vocabulary size
    vocab: int = TransformerSizes.vocab


@dataclass
class ConvnetSizeConfig:
    """Size of the convnet workload (model.convnet); its classes are model.num_classes; the defaults are the
    rank's (workload.sizes)."""

    # channels of the stem and the first stage (doubled at each later stage)
    width: int = ConvnetSizes.width
    # residual blocks per stage
    blocks: int = ConvnetSizes.blocks
    # stages; each after the first halves the resolution
    stages: int = ConvnetSizes.stages
    # image height and width, pixels
    image_size: int = ConvnetSizes.image_size
    # image channels
    channels: int = ConvnetSizes.channels


@dataclass
class ModelConfig:
    """Size of the DDP MLP workload."""

    # batch size per rank, samples
    batch_size: int = 64
    # input features (the MLP's sizes default to the rank's: workload.sizes)
    input_dim: int = MlpSizes.input_dim
    # width of each hidden layer
    hidden_dim: int = MlpSizes.hidden_dim
    # number of Linear+GELU hidden layers
    hidden_layers: int = MlpSizes.hidden_layers
    # output classes
    num_classes: int = MlpSizes.num_classes
    # synthetic dataset size, samples (at least one global batch)
    num_samples: int = 65536
    # AdamW learning rate
    lr: float = 1e-3
    # the host-sync pattern of this size's reference job, which workload.host_sync follows unless set: none |
    # loss | seed (model=seed_e2e: the seed script's loop)
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
    # workload=script: the script writes ddpbench's rank record through ddpbench.workload.recorder;
    # null = on when the script imports a framework (transformers, lightning): the recorder attaches to its Trainer
    records: Optional[bool] = None
    # --- framework jobs ---
    # a built-in workload trained by a framework Trainer (transformers, lightning); null = the harness's own loop
    framework: Optional[str] = None
    # --- Ray Train ---
    # workload=ray_train: the built-in model (mlp, transformer, convnet) each Ray Train worker trains; the trial
    # runs one driver that hands the harness's loop to the mode's `ray_trainer` (docs/ray.md); null = not Ray Train
    trains: Optional[str] = None
    # workload=ray_train: each built-in model's size arguments; size_args picks the one `trains` names
    model_sizes: Dict[str, Any] = field(default_factory=dict)
    # --- the job's loop ---
    # what a training step makes the host wait for on the device (docs/workload.md): none (ddpbench's sync-free
    # loop), loss (the loss read after every step), seed (the seed script's loop: a synchronize before every step,
    # the host-to-device copy inside the step marker, the loss read after it); own = a framework Trainer's or a
    # user script's own loop (hf_trainer, lightning, script). Default: the model size's (model=seed_e2e: seed)
    host_sync: HostSyncPattern = cast(HostSyncPattern, "${model.host_sync}")
    # Python's garbage collector in ddpbench's timed loop, every mode alike: on (as Python does) | freeze
    # (gc.freeze() before the timed loop: start-up's objects are not scanned again) | off (disabled in the loop)
    gc: GcMode = GcMode.on


@dataclass
class DataConfig:
    """How the workload serves batches."""

    # synthetic (stored samples, no workers) | realistic (workers, per-sample transform, pinned memory on
    # CUDA, prefetching)
    loader: Loader = Loader.synthetic
    # realistic loader: DataLoader worker processes per rank
    workers: int = 2
    # realistic loader: batches prefetched per worker
    prefetch_factor: int = 2


@dataclass
class StopConfig:
    """When a trial's timed loop ends."""

    # "steps" (fixed work: wall time sees per-step cost) or "duration" (lockstep clock stop)
    kind: StopKind = StopKind.steps
    # timed steps per rank, for kind=steps
    steps: Optional[int] = 200
    # seconds of timed training, for kind=duration
    duration_sec: Optional[float] = None
    # untimed steps before the timed loop
    warmup_steps: int = 10
    # duration stop: ranks agree on stopping every this many steps (all-reduce MAX); 50 costs ~0.01% of a
    # small-model CPU step (docs/workload.md)
    check_every: int = 50
    # duration stop: true = lockstep (the fix); false = the reference's per-rank clock (hangs)
    sync: bool = True
    # framework scripts: true = keep the Trainer's own max_steps (stop.steps is not applied; the record says how
    # many ran); false = ddpbench sets the optimizer steps (warmup + stop.steps)
    from_script: bool = False


@dataclass
class InjectConfig:
    """Known costs the calibration modes add (`inject`: host side, `inject_device`: device side); others ignore them."""

    # mode=inject: wall time the host waits in every timed step on every rank (sleep, spin the last 0.2 ms), ms
    step_ms: float = 2.0
    # mode=inject_device: GPU time queued in every timed step on every rank (a spin kernel sized in-process with
    # CUDA events), ms; CUDA only
    device_step_ms: float = 2.0
    # sleep before the process group is created, s
    startup_s: float = 1.0
    # sleep after the timed loop, before exit, s
    teardown_s: float = 0.5


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
