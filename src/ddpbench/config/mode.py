"""How one arm of the comparison is launched (mode.*), and the settings of the tools ddpbench ships beside
TraceML (tool.*): torch.profiler, py-spy, W&B offline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from ddpbench.choices import ArtifactKind, ProfilerHandler, Role, SwitchWhat


@dataclass
class ArtifactConfig:
    """The tool output a mode must leave for its trial to count (mode.artifacts); checked by ddpbench.trial.artifacts."""

    kind: ArtifactKind = MISSING
    # file or folder relative to the job dir; may use the command placeholders ({run_name}, ...)
    path: str = MISSING


@dataclass
class ModeSwitchConfig:
    """What ``switching=blocks`` turns on and off inside a trial of this mode (mode.switch; docs/analysis.md)."""

    what: SwitchWhat = MISSING
    # what stays on while the switch is off (shown in the report's caveat when the within-trial figure is low)
    stays_on: str = ""


@dataclass
class ModeConfig:
    """How one arm of the comparison is launched. A mode is data: adding a tool is one YAML file."""

    # label used in reports; defaults to the option name
    name: str = MISSING
    role: Role = Role.tool
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
    # how the tool attaches to the job, as its users attach it (shown in the report's setup); "" = no tool
    attach: str = ""
    # --- tool versions (versions=, docs/versions.md) ---
    # argv printing the tool launcher's help ({python} = the version's environment); every --flag of
    # `command` must appear in it, checked once per version ([] = no check)
    help_command: List[str] = field(default_factory=list)
    # version specifier (e.g. "<0.5") -> the command used instead of `command` by versions it matches (first match)
    command_by_version: Dict[str, List[str]] = field(default_factory=dict)
    # version specifier -> environment added for versions it matches (first match; over `env`); values may use the
    # command placeholders and {workload_args_json} (the workload's arguments as a JSON list)
    env_by_version: Dict[str, Dict[str, str]] = field(default_factory=dict)
    # version specifier -> the help command used instead of `help_command` by versions it matches (first match)
    help_command_by_version: Dict[str, List[str]] = field(default_factory=dict)
    # the tool versions this mode can run, a version specifier (e.g. ">=0.3.1"; "" = any); others are refused
    tool_versions: str = ""
    # --- Ray Train ---
    # workload=ray_train: the Ray Train trainer this mode runs, `_target_: module.Class` plus its keyword arguments
    # (nested `_target_`s built too; strings may use the command placeholders); null = the mode cannot run it
    ray_trainer: Optional[Dict[str, Any]] = None
    # --- within-trial switching ---
    # what switching=blocks switches in this mode (null = the mode cannot be switched: refused with switching=blocks)
    switch: Optional[ModeSwitchConfig] = None
    # version specifier -> the switch of the tool versions it matches instead of `switch` (first match; versions=)
    switch_by_version: Dict[str, ModeSwitchConfig] = field(default_factory=dict)


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
    handler: ProfilerHandler = ProfilerHandler.tensorboard


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

