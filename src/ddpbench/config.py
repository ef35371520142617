"""Structured configs: the schema every composed ddpbench config is checked against.

The YAML in ``conf/`` supplies the values; these dataclasses supply types, defaults and the
meaning of each key. :func:`validate` checks ranges and rules that types cannot express and
raises :class:`~ddpbench.errors.ConfigError` with one line naming the key and the rule; the rules of
one cluster backend live with that backend (:meth:`ddpbench.cluster.base.Backend.validate`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ddpbench.errors import ConfigError
from ddpbench.formats.condition import NOT_IN_JOB_DIR, arm_name
from ddpbench.formats.rank_record import LOADERS, TIMINGS
from ddpbench.formats.switching import SWITCH_WHAT
from ddpbench.formats.trial_record import MODE_ROLES
from ddpbench.workload.affinity import parse_setting as parse_cpu_affinity


# --- workloads, data loaders, timing ---
@dataclass
class TransformerSizeConfig:
    """Size of the transformer workload (model.transformer)."""

    # embedding width
    d_model: int = 64
    # transformer blocks
    layers: int = 2
    # attention heads; must divide d_model
    heads: int = 4
    # tokens per sample
    seq_len: int = 16
    # vocabulary size
    vocab: int = 512


@dataclass
class ConvnetSizeConfig:
    """Size of the convnet workload (model.convnet); its classes are model.num_classes."""

    # channels of the stem and the first stage (doubled at each later stage)
    width: int = 16
    # residual blocks per stage
    blocks: int = 1
    # stages; each after the first halves the resolution
    stages: int = 2
    # image height and width, pixels
    image_size: int = 16
    # image channels
    channels: int = 3


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


@dataclass
class DataConfig:
    """How the workload serves batches."""

    # synthetic (stored samples, no workers) | realistic (workers, per-sample transform, pinned memory on
    # CUDA, prefetching)
    loader: str = "synthetic"
    # realistic loader: DataLoader worker processes per rank
    workers: int = 2
    # realistic loader: batches prefetched per worker
    prefetch_factor: int = 2


# --- end of workloads, data loaders, timing ---


# --- tools beside TraceML: torch.profiler, py-spy, W&B offline ---
@dataclass
class ArtifactConfig:
    """The tool output a mode must leave for its trial to count (mode.artifacts); checked by ddpbench.trial.artifacts."""

    # what to check: traceml_summary | torch_trace | speedscope | wandb_offline (see docs/tools.md)
    kind: str = MISSING
    # file or folder relative to the job dir; may use the command placeholders ({run_name}, ...)
    path: str = MISSING


@dataclass
class TorchProfilerConfig:
    """torch.profiler.schedule of mode=torch_profiler, in training steps (warmup and timed steps alike)."""

    # steps skipped before each cycle
    wait: int = 1
    # steps traced but discarded (the profiler's own start-up)
    warmup: int = 1
    # steps recorded per cycle; each cycle writes one trace per rank
    active: int = 3
    # cycles (0 = repeat until the loop ends)
    repeat: int = 1
    # tensorboard (tensorboard_trace_handler: rank<r>.<time>.pt.trace.json) | chrome (export_chrome_trace)
    handler: str = "tensorboard"


@dataclass
class PySpyConfig:
    """py-spy record settings of mode=pyspy (other flags: mode.tool_args, e.g. [--nonblocking])."""

    # samples per second of every process in the agent's tree (py-spy's default is 100)
    rate: int = 100


@dataclass
class WandbConfig:
    """Weights & Biases settings of mode=wandb_offline."""

    # W&B project name of the offline run
    project: str = "ddpbench"


@dataclass
class ToolConfig:
    """Settings of the tools whose modes ddpbench ships beside TraceML (tool.*)."""

    torch_profiler: TorchProfilerConfig = field(default_factory=TorchProfilerConfig)
    pyspy: PySpyConfig = field(default_factory=PySpyConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)


TORCH_PROFILER_HANDLERS = ("tensorboard", "chrome")
#: kinds of mode.artifacts; each has its check in ddpbench.trial.artifacts
ARTIFACT_KINDS = ("traceml_summary", "torch_trace", "speedscope", "wandb_offline")


def validate_tool(tool: ToolConfig, mode: ModeConfig) -> None:
    """Check the tool.* settings and the mode's declared artifact; raise ConfigError naming the first broken key."""
    if mode.artifacts is not None:
        _require(mode.artifacts.kind in ARTIFACT_KINDS, "mode.artifacts.kind", f"must be one of {', '.join(ARTIFACT_KINDS)}",
                 mode.artifacts.kind)
    prof = tool.torch_profiler
    for key in ("wait", "warmup", "repeat"):
        _require(getattr(prof, key) >= 0, f"tool.torch_profiler.{key}", "must be >= 0", getattr(prof, key))
    _require(prof.active >= 1, "tool.torch_profiler.active", "must be >= 1", prof.active)
    _require(prof.handler in TORCH_PROFILER_HANDLERS, "tool.torch_profiler.handler", "must be tensorboard or chrome",
             prof.handler)
    _require(tool.pyspy.rate >= 1, "tool.pyspy.rate", "must be >= 1", tool.pyspy.rate)
    _require(bool(_NAME_RE.match(str(tool.wandb.project))), "tool.wandb.project",
             "must use letters, digits, '.', '_', '-'", tool.wandb.project)


# --- end of tools beside TraceML ---


@dataclass
class ModelConfig:
    """Size of the DDP MLP workload."""

    # batch size per rank, samples
    batch_size: int = 64
    # input features
    input_dim: int = 512
    # width of each hidden layer
    hidden_dim: int = 512
    # number of Linear+GELU hidden layers
    hidden_layers: int = 2
    # output classes
    num_classes: int = 10
    # synthetic dataset size, samples (at least one global batch)
    num_samples: int = 65536
    # AdamW learning rate
    lr: float = 1e-3
    # workload=transformer sizes
    transformer: TransformerSizeConfig = field(default_factory=TransformerSizeConfig)
    # workload=convnet sizes
    convnet: ConvnetSizeConfig = field(default_factory=ConvnetSizeConfig)


@dataclass
class StopConfig:
    """When a trial's timed loop ends."""

    # "steps" (fixed work: wall time sees per-step cost) or "duration" (lockstep clock stop)
    kind: str = "steps"
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
class ModeSwitchConfig:
    """What ``switching=blocks`` turns on and off inside a trial of this mode (mode.switch; docs/analysis.md)."""

    # one of ddpbench.formats.switching.SWITCH_WHAT: none (a no-op switch: the method's noise floor), trace_step
    # (TraceML's step wrapping + TRACEML_DISABLED), torch_profiler (an active recording), wandb_log (the per-step
    # log call), inject (the injected wait)
    what: str = MISSING
    # what stays on while the switch is off (shown in the report's caveat when the within-trial figure is low)
    stays_on: str = ""


@dataclass
class ModeConfig:
    """How one arm of the comparison is launched. A mode is data: adding a tool is one YAML file."""

    # label used in reports; defaults to the option name
    name: str = MISSING
    # what the mode is to the analysis (one of MODE_ROLES): baseline (compared against), tool (judged against
    # the budget), aa (the baseline again: the noise floor), calibration (known injected costs)
    role: str = "tool"
    # the tool keeps run state every node must read, so a multi-node trial needs cluster.shared_dir=true
    needs_shared_dir: bool = False
    # one line on what this mode measures
    description: str = ""
    # Python module that must be importable for this mode (null = none)
    requires: Optional[str] = None
    # pip package that provides `requires`, named in the error message
    requires_package: Optional[str] = None
    # argv template for one node agent; {placeholders} are filled at launch (see trial/command.py)
    command: List[str] = field(default_factory=list)
    # tool options; the command's "{tool_args}" token expands to them
    tool_args: List[str] = field(default_factory=list)
    # extra environment for the node agent; values may use the same placeholders
    env: Dict[str, str] = field(default_factory=dict)
    # extra workload arguments appended for this mode only (e.g. injected costs)
    workload_args: List[str] = field(default_factory=list)
    # file this tool writes its own summary to, relative to the job dir (null = none)
    summary_file: Optional[str] = None
    # --- tools beside TraceML ---
    # executable that must be found (PATH, or beside this Python) for this mode (null = none); a wrapper or
    # command token equal to it is run from where it was found
    requires_executable: Optional[str] = None
    # argv tokens put before `command` (same placeholders): a sampler that runs the launcher, e.g. py-spy
    wrapper: List[str] = field(default_factory=list)
    # the tool output a trial must leave to be ok (null = none: native modes)
    artifacts: Optional[ArtifactConfig] = None
    # --- framework jobs ---
    # how the tool attaches to the job, as its users attach it (shown in the report's setup among the
    # config differences between modes); "" = no tool
    attach: str = ""
    # --- tool versions (versions=, docs/versions.md) ---
    # argv printing the tool launcher's help ({python} = the version's environment); every --flag of
    # `command` must appear in it, checked once per version ([] = no check)
    help_command: List[str] = field(default_factory=list)
    # version specifier (e.g. "<0.5") -> the command used instead of `command` by versions it matches
    command_by_version: Dict[str, List[str]] = field(default_factory=dict)
    # --- Ray Train ---
    # workload=ray_train: the Ray Train trainer this mode runs, as `_target_: module.Class` plus its own keyword
    # arguments (nested `_target_` dicts are built too; strings may use the command placeholders, e.g.
    # {job_dir}); ddpbench adds the loop, scaling, torch and run configs. null = the mode cannot run ray_train
    ray_trainer: Optional[Dict[str, Any]] = None
    # --- within-trial switching ---
    # what switching=blocks switches in this mode (null = the mode cannot be switched: refused with switching=blocks)
    switch: Optional[ModeSwitchConfig] = None


@dataclass
class SlurmConfig:
    """SLURM settings of a ``kind: slurm`` cluster; ``hydra/launcher=ddpbench`` reads them."""

    # sbatch --partition (null = the cluster's default partition)
    partition: Optional[str] = None
    # GPUs per node (null = none requested)
    gpus_per_node: Optional[int] = None
    # CPUs for the one task per node (null = SLURM's default)
    cpus_per_task: Optional[int] = None
    # memory per node, GB (null = SLURM's default)
    mem_gb: Optional[int] = None
    # job time limit, minutes (null = from the trial timeout: ceil((timeout + wait_margin_s) / 60))
    timeout_min: Optional[int] = None
    # shell lines run in the sbatch script before srun (module load, venv activation, exports)
    setup: List[str] = field(default_factory=list)
    # extra sbatch options, e.g. {constraint: t4, exclusive: true}
    additional_parameters: Dict[str, Any] = field(default_factory=dict)
    # the submitter waits at most trial timeout + this many seconds for a running job
    wait_margin_s: float = 120.0
    # the submitter waits at most this many seconds for a job to leave the queue (PENDING)
    queue_timeout_s: float = 3600.0
    # seconds between the submitter's checks of a job
    poll_s: float = 1.0
    # seconds node 0 waits, after its own agent ended, for the other nodes' records
    peer_record_wait_s: float = 60.0
    # true: the sweep submits ONE job (nodes = cluster.nnodes) whose batch script runs the whole sweep in
    # order on the same nodes (each trial is one `srun` step, one agent per node), instead of one job per
    # trial: both arms of every pair run on the same machines (ddpbench.slurm.steps)
    one_allocation: bool = False


@dataclass
class RayConfig:
    """Ray settings of a ``kind: ray`` cluster (ddpbench.cluster.ray_backend, docs/ray.md)."""

    # the running cluster's GCS address HOST:PORT; auto = $RAY_ADDRESS, else the cluster `ray start` left here
    address: str = "auto"
    # logical CPUs each node's placement-group bundle asks for (null = cluster.nproc_per_node)
    cpus_per_node: Optional[float] = None
    # extra resources per node rank, e.g. [{node0: 1}, {node1: 1}] for scripts/ray-local.sh's cluster
    node_resources: List[Dict[str, Any]] = field(default_factory=list)
    # seconds a trial waits for its placement group (nodes with the resources) before it fails
    placement_timeout_s: float = 60.0
    # seconds the driver waits for the cluster's address to answer before the sweep stops (exit 2)
    connect_timeout_s: float = 10.0


@dataclass
class ClusterConfig:
    """Where and how a trial's node agents run."""

    # label used in reports
    name: str = MISSING
    # the backend that places node agents: local (this host), slurm (submitit), static (one driver per
    # node), or the module path of your own (ddpbench.cluster.base.Backend)
    kind: str = "local"
    # nodes (torchrun agents) per trial
    nnodes: int = 1
    # ranks per node
    nproc_per_node: int = 2
    # auto | cpu | cuda
    device: str = "cpu"
    # torch.distributed backend: auto | gloo | nccl
    backend: str = "gloo"
    # fp32 | bf16 | fp16
    precision: str = "fp32"
    # torch threads per rank (OMP_NUM_THREADS); 0 = leave unset
    threads_per_rank: int = 1
    # rendezvous address; local backend uses loopback
    master_addr: str = "127.0.0.1"
    # this driver's node rank (static backend: each node runs its own driver)
    node_rank: int = 0
    # static backend: first of the ports node 0 must accept from the other nodes: the drivers'
    # coordinator listens on base_port, trial k (job number) rendezvouses on base_port + 1 + 2*k and
    # runs a tool's aggregator on base_port + 2 + 2*k (0 = derive all of them from the sweep name)
    base_port: int = 0
    # static backend: seconds a node waits at a trial for its peers before failing it (torchrun's
    # static rendezvous / TCPStore timeout, and how long node 0 waits for a peer's node record)
    rendezvous_timeout_s: float = 60.0
    # static backend: whether every node sees the same sweep dir (NFS, EFS...). true: node 0 reads the
    # other nodes' records from it; false: the ranks send their records to rank 0 through the process
    # group (the other nodes' agent wall times are then unknown) and TraceML modes are refused
    shared_dir: bool = True
    # slurm backend settings (ignored elsewhere)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    # ray backend settings (ignored elsewhere)
    ray: RayConfig = field(default_factory=RayConfig)
    # --- cpu affinity ---
    # pin each rank to CPUs: auto (spread the ranks, keep the driver and agents off their CPUs where
    # CPUs allow) | none | a CPU list for the ranks in order: "0-3", [0,1] (ddpbench.workload.affinity)
    cpu_affinity: Any = "none"
    # --- end of cpu affinity ---


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


@dataclass
class InjectConfig:
    """Known costs the `inject` mode adds, for calibration; other modes ignore them."""

    # wall time waited in every timed step on every rank (sleep, spin the last 0.2 ms), ms
    step_ms: float = 2.0
    # sleep before the process group is created, s
    startup_s: float = 1.0
    # sleep after the timed loop, before exit, s
    teardown_s: float = 0.5


@dataclass
class SwitchingConfig:
    """Within-trial switching (conf/switching/): blocks of steps with the tool's per-step work off and on, ABBA order."""

    # none (off) | blocks (switch the mode's mode.switch.what every block_steps timed steps)
    kind: str = "none"
    # timed steps per block (docs/accuracy.md: how the default was chosen)
    block_steps: int = 10
    # steps at the start of each block left out of its statistics (recorded): what a switch leaves behind
    washout_steps: int = 2
    # seed of the first block's side; null = seed * 1000 + repeat (a different draw per repeat, recorded)
    seed: Optional[int] = None


def switching_seed(cfg: "DdpbenchConfig") -> int:
    """The seed the first block's side of this trial is drawn from."""
    sw = cfg.switching
    return sw.seed if sw.seed is not None else cfg.seed * 1000 + parse_repeat(cfg.repeat)


def validate_switching(cfg: "DdpbenchConfig") -> None:
    """Check switching.*; with switching=blocks, refuse a mode or workload that cannot be switched (one line)."""
    sw, mode = cfg.switching, cfg.mode
    _require(sw.kind in ("none", "blocks"), "switching.kind", "must be none or blocks", sw.kind)
    _require(sw.block_steps >= 1, "switching.block_steps", "must be >= 1", sw.block_steps)
    _require(0 <= sw.washout_steps < sw.block_steps, "switching.washout_steps",
             f"must be >= 0 and < switching.block_steps={sw.block_steps}", sw.washout_steps)
    if mode.switch is not None:
        _require(mode.switch.what in SWITCH_WHAT, "mode.switch.what", f"must be one of {', '.join(SWITCH_WHAT)}",
                 mode.switch.what)
    if sw.kind != "blocks":
        return
    if mode.switch is None:
        raise ConfigError(f"switching=blocks: mode={mode.name} cannot be switched inside a trial "
                          "(its YAML declares no mode.switch; e.g. an outside sampler); use switching=none")
    if cfg.workload.path is not None or cfg.workload.framework is not None:
        raise ConfigError(f"switching=blocks: workload={cfg.workload.name} is not run by ddpbench's own loop; "
                          "only the built-in workloads (mlp, transformer, convnet) switch")


@dataclass
class TrialConfig:
    """Limits and outputs of one trial."""

    # watchdog limit in seconds; null = expected duration * timeout_factor + timeout_margin_s
    timeout_s: Optional[float] = None
    # expected seconds per timed step, used for the automatic timeout of a steps stop
    expected_step_s: float = 0.5
    # automatic timeout: expected training time times this
    timeout_factor: float = 3.0
    # automatic timeout: plus this many seconds (start-up, TraceML's finalisation)
    timeout_margin_s: float = 120.0
    # process-group timeout inside the workload, s: a hung collective becomes an error
    collective_timeout_s: float = 60.0
    # rank 0 prints a progress line every N timed steps to its log, shown live on a terminal (0 = silent)
    log_every: int = 50
    # keep the per-step times in the rank records
    save_step_times: bool = True
    # skip a trial whose trial.json is ok for the same resolved config
    resume: bool = True


# --- repeat=auto: when to stop adding pairs ---
#: paired metrics repeat=auto may decide on (per-pair values of the analysis; units: % or ms)
PRECISION_METRICS = ("projected_overhead_pct", "step_overhead_pct", "step_overhead_ms", "step_median_overhead_pct",
                     "step_median_overhead_ms", "throughput_overhead_pct", "wall_overhead_pct",
                     "switched_step_overhead_ms")


@dataclass
class PrecisionConfig:
    """When ``repeat=auto`` stops adding pairs (ddpbench.analysis.sequential; docs/analysis.md)."""

    # the paired metric the rule decides on (one of PRECISION_METRICS); % metrics are compared with
    # budget_pct, ms metrics with budget_ms; projected_overhead_pct (per-step cost plus the fixed cost over a
    # job of report.job_hours) is what the report's verdict is on; switched_step_overhead_ms (switching=blocks) is
    # the within-trial per-step cost, one value per pair: the mode trial's own estimate
    metric: str = "projected_overhead_pct"
    # stop once the interval's half-width is at most this (the metric's unit); null = only a decisive
    # verdict, max_pairs or max_minutes stop
    halfwidth_pct: Optional[float] = 1.0
    # never stop before this many pairs per condition (at least 2: an interval needs two)
    min_pairs: int = 3
    # never run more than this many pairs per condition
    max_pairs: int = 12
    # stop adding pairs once the sweep has run this long, minutes
    max_minutes: float = 60.0
    # how the error rate is spread over the looks: pocock (decides early) or obrien_fleming
    spending: str = "pocock"
    # budget for a ms metric, ms per step (null = a ms metric needs it set)
    budget_ms: Optional[float] = None
    # a pair whose trials' load shows other work disturbed it: rerun = not counted, the next repeat
    # takes its place (it still uses up max_pairs and max_minutes); count = counted like any other
    disturbed: str = "rerun"


# --- end of repeat=auto ---


@dataclass
class ReportConfig:
    """How the report turns the trials' figures into a verdict (ddpbench.analysis.projection)."""

    # length of the user's job, hours of training: the fixed costs (start-up, teardown) are paid once per
    # job, the per-step cost all along; the verdict is on (per-step cost over the job + fixed cost) / job
    job_hours: float = 1.0


@dataclass
class DdpbenchConfig:
    """The whole composed config of one trial."""

    model: ModelConfig = field(default_factory=ModelConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    data: DataConfig = field(default_factory=DataConfig)
    # step: host clock at step boundaries (quote this) | phase: per-phase times, CUDA sync after each phase
    timing: str = "step"
    stop: StopConfig = field(default_factory=StopConfig)
    mode: ModeConfig = field(default_factory=ModeConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    fault: FaultConfig = field(default_factory=FaultConfig)
    inject: InjectConfig = field(default_factory=InjectConfig)
    trial: TrialConfig = field(default_factory=TrialConfig)
    # within-trial switching of the tool's per-step work (switching=none | blocks)
    switching: SwitchingConfig = field(default_factory=SwitchingConfig)
    # settings of the shipped tools' modes
    tool: ToolConfig = field(default_factory=ToolConfig)
    # repeat label; a sweep gives A-B, the sweeper expands it. Not typed int on purpose.
    repeat: Any = 1
    # position of this trial within its pair (set by the sweeper)
    pair_position: int = 0
    # sweep folder name under outputs/multirun; reuse it to resume a sweep
    sweep_name: str = MISSING
    # random seed of the workload's data and weights
    seed: int = 42
    # baseline mode for the report
    baseline: str = "native"
    # overhead budget for the report's verdicts, %
    budget_pct: float = 2.0
    # repeat=auto: when to stop adding pairs
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    # the report's verdict
    report: ReportConfig = field(default_factory=ReportConfig)
    # tool versions compared in one sweep: mode -> version specs (a PyPI version or requirement, a wheel file,
    # a source tree, path@ref of a git repository); each spec is an arm of its own (docs/versions.md)
    versions: Dict[str, List[str]] = field(default_factory=dict)
    # the version spec this trial's arm runs (the sweeper sets it from `versions`; null = the installed tool)
    version: Optional[str] = None
    # a version is a regression when its per-step cost exceeds the previous version's by more than this, %
    regression_pct: float = 1.0


def register_configs() -> None:
    """Register the schema so ``config.yaml``'s defaults list can name it, and the keys no job dir names."""
    if not OmegaConf.has_resolver("ddpbench_not_in_job_dir"):
        OmegaConf.register_new_resolver("ddpbench_not_in_job_dir", lambda: list(NOT_IN_JOB_DIR))
    schema = OmegaConf.structured(DdpbenchConfig)
    for key in ("workload.metrics", "workload.units", "versions"):  # user-named keys: `workload.metrics.NAME=...`, no `+`
        OmegaConf.set_struct(OmegaConf.select(schema, key), False)
    ConfigStore.instance().store(name="ddpbench_schema", node=schema)


_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def _require(condition: bool, key: str, rule: str, value: Any) -> None:
    if not condition:
        raise ConfigError(f"{key}={value!r}: {rule}")


def parse_repeat(value: Any) -> int:
    """Return the integer repeat label of one trial, or raise ConfigError."""
    text = str(value).strip()
    if not re.fullmatch(r"-?\d+", text):
        raise ConfigError(
            f"repeat={value!r}: must be an integer label, or a range A-B / range(A,B+1) / A,B,... in a -m sweep"
        )
    number = int(text)
    _require(number >= 1, "repeat", "must be >= 1", value)
    return number


def validate(cfg: DdpbenchConfig) -> None:
    """Check every rule types cannot express; raise ConfigError naming the first broken key."""
    m, s, c, f, t, inj = cfg.model, cfg.stop, cfg.cluster, cfg.fault, cfg.trial, cfg.inject
    for key in ("batch_size", "input_dim", "hidden_dim", "hidden_layers", "num_classes", "num_samples"):
        _require(getattr(m, key) >= 1, f"model.{key}", "must be >= 1", getattr(m, key))
    _require(m.lr > 0, "model.lr", "must be > 0", m.lr)
    for group in ("transformer", "convnet"):
        for key, value in asdict(getattr(m, group)).items():
            _require(value >= 1, f"model.{group}.{key}", "must be >= 1", value)
    _require(m.transformer.d_model % m.transformer.heads == 0, "model.transformer.d_model",
             f"must be a multiple of model.transformer.heads={m.transformer.heads}", m.transformer.d_model)
    _require(cfg.data.loader in LOADERS, "data.loader", "must be synthetic or realistic", cfg.data.loader)
    _require(cfg.data.workers >= 1, "data.workers", "must be >= 1", cfg.data.workers)
    _require(cfg.data.prefetch_factor >= 1, "data.prefetch_factor", "must be >= 1", cfg.data.prefetch_factor)
    _require(cfg.timing in TIMINGS, "timing", "must be step or phase", cfg.timing)
    _require(s.kind in ("steps", "duration"), "stop.kind", "must be 'steps' or 'duration'", s.kind)
    if s.kind == "steps":
        _require(s.steps is not None and s.steps >= 1, "stop.steps", "must be >= 1 with stop=steps", s.steps)
    else:
        _require(
            s.duration_sec is not None and s.duration_sec > 0,
            "stop.duration_sec",
            "must be > 0 with stop=duration",
            s.duration_sec,
        )
    _require(s.warmup_steps >= 0, "stop.warmup_steps", "must be >= 0", s.warmup_steps)
    _require(s.check_every >= 1, "stop.check_every", "must be >= 1", s.check_every)
    _require(c.nnodes >= 1, "cluster.nnodes", "must be >= 1", c.nnodes)
    _require(c.nproc_per_node >= 1, "cluster.nproc_per_node", "must be >= 1", c.nproc_per_node)
    _require(c.device in ("auto", "cpu", "cuda"), "cluster.device", "must be auto, cpu or cuda", c.device)
    _require(c.backend in ("auto", "gloo", "nccl"), "cluster.backend", "must be auto, gloo or nccl", c.backend)
    _require(c.precision in ("fp32", "bf16", "fp16"), "cluster.precision", "must be fp32, bf16 or fp16", c.precision)
    _require(c.threads_per_rank >= 0, "cluster.threads_per_rank", "must be >= 0", c.threads_per_rank)
    _require(0 <= c.node_rank < c.nnodes, "cluster.node_rank", f"must be in [0, {c.nnodes - 1}]", c.node_rank)
    _require(c.base_port == 0 or 1024 <= c.base_port <= 65000, "cluster.base_port", "must be 0 or in [1024, 65000]", c.base_port)
    # --- cpu affinity ---
    try:
        parse_cpu_affinity(c.cpu_affinity)
    except ValueError as error:
        raise ConfigError(f"cluster.cpu_affinity={c.cpu_affinity!r}: {error}") from None
    # --- end of cpu affinity ---
    world = c.nnodes * c.nproc_per_node
    _require(
        m.num_samples >= m.batch_size * world,
        "model.num_samples",
        f"must be >= one global batch (batch_size * world size = {m.batch_size * world})",
        m.num_samples,
    )
    for key in ("crash_at_step", "hang_at_step"):
        value = getattr(f, key)
        _require(value is None or value >= 1, f"fault.{key}", "must be null or >= 1 (a timed step number)", value)
    _require(f.rank is None or 0 <= f.rank < world, "fault.rank", f"must be null or in [0, {world - 1}]", f.rank)
    _require(f.clock_skew_sec >= 0, "fault.clock_skew_sec", "must be >= 0", f.clock_skew_sec)
    for key in ("step_ms", "startup_s", "teardown_s"):
        _require(getattr(inj, key) >= 0, f"inject.{key}", "must be >= 0", getattr(inj, key))
    _require(t.timeout_s is None or t.timeout_s > 0, "trial.timeout_s", "must be null or > 0", t.timeout_s)
    _require(t.collective_timeout_s > 0, "trial.collective_timeout_s", "must be > 0", t.collective_timeout_s)
    _require(t.log_every >= 0, "trial.log_every", "must be >= 0", t.log_every)
    _require(bool(cfg.mode.command), "mode.command", "must be a non-empty list", cfg.mode.command)
    _require(bool(_NAME_RE.match(cfg.sweep_name)), "sweep_name", "must use letters, digits, '.', '_', '-'", cfg.sweep_name)
    _require(cfg.budget_pct > 0, "budget_pct", "must be > 0", cfg.budget_pct)
    _require(cfg.report.job_hours > 0, "report.job_hours", "must be > 0", cfg.report.job_hours)
    _require(cfg.regression_pct > 0, "regression_pct", "must be > 0", cfg.regression_pct)
    _require(cfg.version is None or bool(cfg.mode.requires_package), "version",
             f"mode={cfg.mode.name} names no requires_package: its tool has no version to choose", cfg.version)
    _require(cfg.mode.role in MODE_ROLES, "mode.role", f"must be one of {', '.join(MODE_ROLES)}", cfg.mode.role)
    validate_tool(cfg.tool, cfg.mode)
    parse_repeat(cfg.repeat)
    validate_switching(cfg)


def typed(cfg: DictConfig) -> DdpbenchConfig:
    """A composed config (with or without the schema's type) as the schema's dataclasses, every value resolved.

    The application converts once; everything below takes the typed config or the parts it needs.
    Raises ConfigError (one line, naming the key) for a missing, mistyped or unresolvable value.
    """
    try:
        node = cfg if OmegaConf.get_type(cfg) is DdpbenchConfig else OmegaConf.merge(OmegaConf.structured(DdpbenchConfig), cfg)
        converted = OmegaConf.to_object(node)
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None)
        message = str(getattr(error, "msg", None) or error).splitlines()[0]
        raise ConfigError(f"{key}: {message}" if key else message) from None
    assert isinstance(converted, DdpbenchConfig)
    if converted.version is not None:  # the arm is named by its tool version: traceml==0.4.2
        converted.mode.name = arm_name(converted.mode.name, converted.version)
    return converted


def to_plain(cfg: DdpbenchConfig) -> Dict[str, Any]:
    """The resolved config as plain Python containers (for trial.json; the same content as the composed config's)."""
    return asdict(cfg)
