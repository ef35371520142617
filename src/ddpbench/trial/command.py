"""Turn a mode's command template and the config into the argv and environment of one node agent: ``{name}``
placeholders are filled from :class:`LaunchContext` (an unknown one is a ConfigError); a token that is exactly
``{workload_args}`` or ``{tool_args}`` expands to a list."""

from __future__ import annotations

import json
import os
import string
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Sequence

from ddpbench.cluster import backend_for
from ddpbench.choices import GcMode, HostSyncPattern, StopKind, SwitchWhat
from ddpbench.config import DdpbenchConfig, switches, switching_seed
from ddpbench.trial import ray_train, wrapped
from ddpbench.trial.script_workload import recorder_environment
from ddpbench.errors import ConfigError
from ddpbench.formats.layout import AttemptLayout
from ddpbench.workload import recorder
from ddpbench.workload.args import RankArgs
from ddpbench.workload.flags import render
from ddpbench.workload.sizes import Sizes
from ddpbench.trial.tool import find_executable
from ddpbench.versions.arm import Arm

#: the folder of the built-in workload scripts, run by path (``traceml run`` needs a path)
WORKLOAD_DIR = Path(__file__).resolve().parent.parent / "workload"

LIST_TOKENS = ("{workload_args}", "{tool_args}")
#: the tool's distribution and module, for the rank record's ``tool`` (ddpbench.workload.record)
TOOL_PACKAGE_ENV, TOOL_MODULE_ENV = "DDPBENCH_TOOL_PACKAGE", "DDPBENCH_TOOL_MODULE"


@dataclass(frozen=True)
class LaunchContext:
    """Values a mode template may use, fixed when a node agent is launched."""

    python: str
    script: str
    nnodes: int
    nproc_per_node: int
    node_rank: int
    master_addr: str
    master_port: int
    aggregator_port: int
    aggregator_bind_host: str
    run_name: str
    job_dir: str
    metrics_dir: str

    def placeholders(self) -> Dict[str, str]:
        """Placeholder name -> text."""
        return {key: str(value) for key, value in asdict(self).items()}

    @property
    def attempt(self) -> AttemptLayout:
        """Where the attempt's files lie (``job_dir`` is the attempt's folder)."""
        return AttemptLayout(Path(self.job_dir))


def make_context(cfg: DdpbenchConfig, arm: Arm, *, node_rank: int, master_addr: str, master_port: int,
                 aggregator_port: int, run_name: str, job_dir: Path) -> LaunchContext:
    """Fill a :class:`LaunchContext` from the config, the trial's arm and the values chosen at launch."""
    return LaunchContext(
        python=arm.python,
        script=str(cfg.decided.script.file or WORKLOAD_DIR / cfg.workload.script),
        nnodes=cfg.cluster.nnodes,
        nproc_per_node=cfg.cluster.nproc_per_node,
        node_rank=node_rank,
        master_addr=master_addr,
        master_port=master_port,
        aggregator_port=aggregator_port,
        aggregator_bind_host="127.0.0.1" if cfg.cluster.nnodes == 1 else "0.0.0.0",
        run_name=run_name,
        job_dir=str(job_dir),
        metrics_dir=str(AttemptLayout(job_dir).metrics),
    )


def rank_args(cfg: DdpbenchConfig, metrics_dir: str) -> RankArgs[Sizes]:
    """What the config gives every rank of a built-in workload (every mode the same), its sizes aside."""
    model, stop, cluster, fault, trial, w = cfg.model, cfg.stop, cfg.cluster, cfg.fault, cfg.trial, cfg.workload
    by_steps, own_loop = stop.kind == StopKind.steps, w.host_sync == HostSyncPattern.own
    switch = cfg.mode.switch if switches(cfg) else None
    return RankArgs(
        sizes=Sizes(), steps=stop.steps if by_steps else None, duration_sec=None if by_steps else stop.duration_sec,
        warmup_steps=stop.warmup_steps, stop_check_every=stop.check_every, no_sync_stop=not (by_steps or stop.sync),
        batch_size=model.batch_size, num_samples=model.num_samples, lr=model.lr, seed=cfg.seed,
        loader=cfg.data.loader, loader_workers=cfg.data.workers, prefetch_factor=cfg.data.prefetch_factor,
        timing=cfg.timing,  # a framework Trainer's or a script's loop is its own: no host sync, no gc setting
        host_sync=HostSyncPattern.none if own_loop else w.host_sync,
        gc=GcMode.on if own_loop else w.gc,
        device=cluster.device, backend=cluster.backend, precision=cluster.precision,
        collective_timeout_sec=trial.collective_timeout_s, log_every=trial.log_every, metrics_dir=metrics_dir,
        save_step_times=bool(trial.save_step_times), fault_rank=fault.rank, fault_clock_skew_sec=fault.clock_skew_sec,
        fault_crash_at_step=fault.crash_at_step, fault_hang_at_step=fault.hang_at_step,
        switch=switch.what if switch is not None else SwitchWhat.none,
        switch_block_steps=cfg.switching.block_steps if switch is not None else 0,
        switch_washout_steps=cfg.switching.washout_steps if switch is not None else 0,
        switch_seed=switching_seed(cfg) if switch is not None else 0,
    )


def workload_args(cfg: DdpbenchConfig, metrics_dir: str) -> List[str]:
    """The workload's arguments: :func:`rank_args` rendered, ``workload.size_args``, then the backend's and the mode's
    own (a later flag wins); a user's own script gets its ``workload.args`` and nothing of ddpbench's."""
    if cfg.decided.script.is_user_script:
        return list(cfg.decided.script.args)
    sizes = [f"--{key}={value}" for key, value in cfg.workload.size_args.items()]
    return [*render(rank_args(cfg, metrics_dir)), *sizes, *backend_for(cfg).workload_args(cfg),
            *(str(arg) for arg in cfg.mode.workload_args)]


def _fill(token: str, values: Mapping[str, str]) -> str:
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(token) if name is not None]
    except ValueError as error:
        raise ConfigError(f"mode token {token!r}: {error}") from None
    unknown = [name for name in names if name not in values]
    if unknown:
        allowed = ", ".join(sorted(values) + [t.strip("{}") for t in LIST_TOKENS])
        raise ConfigError(f"mode token {token!r}: unknown placeholder {{{unknown[0]}}} (allowed: {allowed})")
    return token.format(**values)


def render_command(template: Sequence[str], context: LaunchContext, lists: Mapping[str, Sequence[str]]) -> List[str]:
    """Fill ``template`` with ``context``; ``lists`` maps each list token to its expansion."""
    values = context.placeholders()
    argv: List[str] = []
    for token in map(str, template):
        argv.extend(lists[token] if token in lists else [_fill(token, values)])
    return argv


def fill_placeholders(text: str, context: LaunchContext) -> str:
    """``text`` with ``context``'s placeholders filled (unknown ones are a ConfigError)."""
    return _fill(text, context.placeholders())


def node_command(cfg: DdpbenchConfig, arm: Arm, context: LaunchContext) -> List[str]:
    """The argv of one node agent: the mode's ``wrapper`` (then :mod:`~ddpbench.trial.wrapped`'s shell) and the arm's
    command, ``mode.requires_executable`` from where it was found; a Ray Train workload's driver instead."""
    if ray_train.is_ray_train(cfg):  # one driver places the workers: the mode gives its trainer, not a command
        return ray_train.driver_command(cfg, context.python, context.attempt.ray_storage, context.run_name,
                                        lambda text: fill_placeholders(text, context),
                                        workload_args(cfg, context.metrics_dir))
    lists = {"{workload_args}": workload_args(cfg, context.metrics_dir),
             "{tool_args}": [fill_placeholders(str(arg), context) for arg in cfg.mode.tool_args]}
    argv = render_command(cfg.mode.wrapper, context, lists)
    if argv:  # the wrapper's own exit status need not be its command's (py-spy): record the command's
        argv += wrapped.recording_prefix(context.attempt.command_status(context.node_rank))
    argv += render_command(arm.command, context, lists)
    if argv and cfg.mode.requires_executable and argv[0] == cfg.mode.requires_executable:
        argv[0] = find_executable(argv[0]) or argv[0]
    return argv


def node_environment(cfg: DdpbenchConfig, arm: Arm, context: LaunchContext,
                     base: Mapping[str, str] | None = None) -> Dict[str, str]:
    """Environment of one node agent: ``base`` (default os.environ) plus thread limits, the mode's env and what the
    arm's version adds."""
    env = dict(os.environ if base is None else base)
    threads = cfg.cluster.threads_per_rank
    if threads > 0:
        env["OMP_NUM_THREADS"] = str(threads)
        env["MKL_NUM_THREADS"] = str(threads)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(backend_for(cfg).rendezvous_env(cfg, context.run_name))
    values = context.placeholders()
    for key, value in cfg.mode.env.items():
        env[str(key)] = _fill(str(value), values)
    if arm.environment:
        values = {**values, "workload_args_json": json.dumps(workload_args(cfg, context.metrics_dir))}
        env.update({key: _fill(value, values) for key, value in arm.environment.items()})
    if cfg.mode.requires_package:  # the ranks record the tool's version as they import it
        env[TOOL_PACKAGE_ENV] = str(cfg.mode.requires_package)
        env[TOOL_MODULE_ENV] = str(cfg.mode.requires or "")
    for key in recorder.RECORDER_ENV:  # never an outer run's: only this trial's recorder settings
        env.pop(key, None)
    env.update(recorder_environment(cfg, context.metrics_dir, env.get("PYTHONPATH", "")))
    return env


def summary_path(cfg: DdpbenchConfig, context: LaunchContext) -> Path | None:
    """Where the mode's tool writes its own summary, or None."""
    summary = cfg.mode.summary_file
    return Path(context.job_dir) / fill_placeholders(str(summary), context) if summary else None
