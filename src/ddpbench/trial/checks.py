"""Every check a trial's config passes before anything is launched or any job dir is written: values, workload,
Ray Train, cluster backend, tool, command templates and CPU pinning; each refusal is one line naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ddpbench.choices import Loader, StopKind, Timing
from ddpbench.cluster import backend_for
from ddpbench.config import DdpbenchConfig
from ddpbench.config.checks import require
from ddpbench.config.decided import FRAMEWORKS
from ddpbench.errors import ConfigError
from ddpbench.trial import artifacts, ray_train
from ddpbench.trial import command as commands
from ddpbench.trial.pinning import trial_pinning
from ddpbench.trial.tool import check_tool, module_found
from ddpbench.versions.arm import Arm, resolve_arm
from ddpbench.workload.frameworks import ENV_TOOL, ENV_TRACEML_CALLBACK

def check_trial_config(cfg: DdpbenchConfig) -> Arm:
    """Every check that can fail before a trial launches, beyond the values its conversion checked
    (:func:`ddpbench.config.typed_trial`): the workload, the cluster backend, the tool, the command templates and the
    CPU pinning. Returns the trial's arm (an arm at its own version: its environment built now when not cached)."""
    check_script_workload(cfg)
    ray_train.check(cfg)
    backend_for(cfg).validate(cfg)
    arm = resolve_arm(cfg)
    check_tool(cfg, arm)
    check_command(cfg, arm)
    trial_pinning(cfg)
    return arm


def check_command(cfg: DdpbenchConfig, arm: Arm) -> None:
    """Render the mode's templates once with stand-in values: a bad placeholder fails before any launch."""
    context = commands.make_context(
        cfg, arm, node_rank=0, master_addr="127.0.0.1", master_port=1, aggregator_port=2, run_name="check",
        job_dir=Path("job"),
    )
    commands.node_command(cfg, arm, context)
    commands.node_environment(cfg, arm, context, base={})
    commands.summary_path(cfg, context)
    artifacts.artifact_path(cfg, context)


def _script_refusal(cfg: DdpbenchConfig) -> Optional[str]:
    """What a built-in workload honours and a user's script cannot, when the config asks for it: ``key=value: why``."""
    f, s, records = cfg.fault, cfg.stop, cfg.decided.script.records
    for key in ("crash_at_step", "hang_at_step"):
        if getattr(f, key) is not None:
            return f"fault.{key}={getattr(f, key)!r}: fault injection needs a built-in workload"
    if (f.clock_skew_sec or f.rank is not None) and not records:  # the recorder's stop clock honours the skew
        key = "clock_skew_sec" if f.clock_skew_sec else "rank"
        return f"fault.{key}={getattr(f, key)!r}: fault injection needs a built-in workload or ddpbench's recorder"
    if cfg.mode.workload_args:
        return f"mode={cfg.mode.name}: the mode adds ddpbench's own workload flags, which a user's script does not take"
    if cfg.timing != Timing.step:
        return f"timing={cfg.timing!r}: phase timing needs a built-in workload"
    if cfg.data.loader != Loader.synthetic:
        return f"data.loader={cfg.data.loader!r}: the script's own arguments choose its data loader"
    if s.kind == StopKind.duration and not records:
        return ("stop=duration: the lockstep duration stop needs the script to use ddpbench's recorder "
                "(workload.records=true)")
    if not s.sync:
        return "stop.sync=false: the unsynced stop needs a built-in workload"
    if records and not cfg.cluster.shared_dir:
        return "cluster.shared_dir=false: workload.records=true needs the metrics dir on storage every node sees"
    return None


def check_script_workload(cfg: DdpbenchConfig) -> None:
    """The rules of ``workload.path/args/metrics/units/records``: patterns, the script file, what a script cannot do."""
    w, script = cfg.workload, cfg.decided.script
    if script.file is None:
        require(bool(w.script), "workload.path", "workload=script needs workload.path=PATH (your training script)",
                 w.path)
        require(not script.args, "workload.args", "only applies with workload=script", w.args)
        require(not w.records, "workload.records", "only applies with workload=script", w.records)
    else:
        require(not w.script, "workload.path",
                 f"a built-in workload runs workload.script={w.script!r}; use workload=script", w.path)
        require(script.file.is_file(), "workload.path", f"no such file: {script.file}", w.path)
    check_frameworks(cfg)
    refusal = _script_refusal(cfg) if script.is_user_script else None
    if refusal is not None:
        raise ConfigError(f"workload=script with {refusal}")


def _builtin_refusal(cfg: DdpbenchConfig) -> Optional[str]:
    """What a built-in framework workload (``workload.framework`` set) cannot do: ``key=value: why``, or None."""
    if cfg.timing != Timing.step:
        return f"timing={cfg.timing!r}: the Trainer's step is the framework's own, not split into phases by ddpbench"
    if cfg.data.loader != Loader.synthetic:
        return f"data.loader={cfg.data.loader!r}: the Trainer builds its own data loader from the synthetic samples"
    for key in ("crash_at_step", "hang_at_step"):
        if getattr(cfg.fault, key) is not None:
            return f"fault.{key}={getattr(cfg.fault, key)!r}: only the clock skew reaches a framework Trainer"
    if not cfg.stop.sync:
        return "stop.sync=false: the Trainer stops through ddpbench's lockstep check only"
    return None


def check_frameworks(cfg: DdpbenchConfig) -> None:
    """A framework the script (or built-in workload) uses must be importable here, and what it cannot do is
    refused: one line each, before any launch."""
    framework, script = cfg.workload.framework, cfg.decided.script
    if framework:
        refusal = _builtin_refusal(cfg)
        if refusal is not None:
            raise ConfigError(f"workload={cfg.workload.name} with {refusal}")
    for name in (framework,) if framework else script.frameworks:
        if not module_found(name):
            user = f"workload.path={cfg.workload.path!r}: the script imports" if not framework else \
                f"workload={cfg.workload.name}: trains with"
            raise ConfigError(f"{user} {name}, which is not installed (pip install {FRAMEWORKS.get(name, name)}, "
                              "or ddpbench[frameworks])")
    through = [key for key in (ENV_TOOL, ENV_TRACEML_CALLBACK) if key in cfg.mode.env]
    if through and not (framework or (script.records and script.frameworks)):
        raise ConfigError(f"mode={cfg.mode.name}: attaches its tool to a framework Trainer ({through[0]}); "
                          f"workload={cfg.workload.name} has none (use workload=hf_trainer, lightning or a framework script)")
    if cfg.stop.from_script and not script.frameworks:
        raise ConfigError("stop.from_script=true: keeps a framework Trainer's own max_steps; the script imports "
                          "no framework (transformers, lightning)")
