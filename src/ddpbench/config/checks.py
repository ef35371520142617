"""The rules types cannot express: :func:`validate` raises :class:`~ddpbench.errors.ConfigError`, one line naming the
key and the rule (a cluster backend's own rules: :meth:`ddpbench.cluster.base.Backend.validate`)."""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from ddpbench.choices import Device, GcMode, HostSyncPattern, StopKind, SwitchingKind
from ddpbench.config.mode import ModeConfig, ToolConfig
from ddpbench.config.schema import DdpbenchConfig
from ddpbench.config.workload import WorkloadConfig
from ddpbench.errors import ConfigError
from ddpbench.formats.rank_loop import HARNESS_HOST_SYNCS


_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def require(condition: bool, key: str, rule: str, value: Any) -> None:
    """Refuse `key=value` in one line, naming `rule`, unless `condition` holds."""
    if not condition:
        raise ConfigError(f"{key}={value!r}: {rule}")


def _at_least(low: int, part: Any, prefix: str, *keys: str) -> None:
    """Require each of ``part``'s ``keys`` (named ``prefix.key``) to be at least ``low``."""
    for key in keys:
        require(getattr(part, key) >= low, f"{prefix}.{key}", f"must be >= {low}", getattr(part, key))


def parse_repeat(value: Any) -> int:
    """Return the integer repeat label of one trial, or raise ConfigError."""
    text = str(value).strip()
    if not re.fullmatch(r"-?\d+", text):
        raise ConfigError(
            f"repeat={value!r}: must be an integer label, or a range A-B / range(A,B+1) / A,B,... in a -m sweep"
        )
    number = int(text)
    require(number >= 1, "repeat", "must be >= 1", value)
    return number


def validate(cfg: DdpbenchConfig) -> DdpbenchConfig:
    """Check every rule types cannot express; raise ConfigError naming the first broken key. ``cfg`` is decided
    (its repeat and CPU affinity parsed: ddpbench.config.decided); returns it."""
    m, s, c, f, t, inj = cfg.model, cfg.stop, cfg.cluster, cfg.fault, cfg.trial, cfg.inject
    _at_least(1, m, "model", "batch_size", "input_dim", "hidden_dim", "hidden_layers", "num_classes", "num_samples")
    require(m.lr > 0, "model.lr", "must be > 0", m.lr)
    for group in ("transformer", "convnet"):
        _at_least(1, getattr(m, group), f"model.{group}", *asdict(getattr(m, group)))
    require(m.transformer.d_model % m.transformer.heads == 0, "model.transformer.d_model",
             f"must be a multiple of model.transformer.heads={m.transformer.heads}", m.transformer.d_model)
    _at_least(1, cfg.data, "data", "workers", "prefetch_factor")
    if s.kind == StopKind.steps:
        require(s.steps is not None and s.steps >= 1, "stop.steps", "must be >= 1 with stop=steps", s.steps)
    else:
        require(s.duration_sec is not None and s.duration_sec > 0, "stop.duration_sec",
                 "must be > 0 with stop=duration", s.duration_sec)
    _at_least(0, s, "stop", "warmup_steps")
    _at_least(1, s, "stop", "check_every")
    _at_least(1, c, "cluster", "nnodes", "nproc_per_node")
    _at_least(0, c, "cluster", "threads_per_rank")
    require(0 <= c.node_rank < c.nnodes, "cluster.node_rank", f"must be in [0, {c.nnodes - 1}]", c.node_rank)
    require(c.base_port == 0 or 1024 <= c.base_port <= 65000, "cluster.base_port", "must be 0 or in [1024, 65000]",
             c.base_port)
    world = c.nnodes * c.nproc_per_node
    require(m.num_samples >= m.batch_size * world, "model.num_samples",
             f"must be >= one global batch (batch_size * world size = {m.batch_size * world})", m.num_samples)
    for key in ("crash_at_step", "hang_at_step"):
        value = getattr(f, key)
        require(value is None or value >= 1, f"fault.{key}", "must be null or >= 1 (a timed step number)", value)
    require(f.rank is None or 0 <= f.rank < world, "fault.rank", f"must be null or in [0, {world - 1}]", f.rank)
    require(f.clock_skew_sec >= 0, "fault.clock_skew_sec", "must be >= 0", f.clock_skew_sec)
    _at_least(0, inj, "inject", "step_ms", "device_step_ms", "startup_s", "teardown_s", "side_cpu", "side_mb")
    require(inj.side_cpu <= 1, "inject.side_cpu", "must be at most 1 (one core)", inj.side_cpu)
    validate_loop(cfg)
    require(t.timeout_s is None or t.timeout_s > 0, "trial.timeout_s", "must be null or > 0", t.timeout_s)
    require(t.collective_timeout_s > 0, "trial.collective_timeout_s", "must be > 0", t.collective_timeout_s)
    _at_least(0, t, "trial", "log_every")
    require(bool(cfg.mode.command), "mode.command", "must be a non-empty list", cfg.mode.command)
    require(bool(_NAME_RE.match(cfg.sweep_name)), "sweep_name", "must use letters, digits, '.', '_', '-'",
             cfg.sweep_name)
    require(cfg.budget_pct > 0, "budget_pct", "must be > 0", cfg.budget_pct)
    require(cfg.report.job_hours > 0, "report.job_hours", "must be > 0", cfg.report.job_hours)
    require(cfg.regression_pct > 0, "regression_pct", "must be > 0", cfg.regression_pct)
    require(cfg.version is None or bool(cfg.mode.requires_package), "version",
             f"mode={cfg.mode.name} names no requires_package: its tool has no version to choose", cfg.version)
    validate_tool(cfg.tool)
    validate_switching(cfg)
    validate_metrics(cfg.workload)
    return cfg


def validate_metrics(w: WorkloadConfig) -> None:
    """``workload.metrics`` patterns (any workload) each have exactly one capture group; ``units`` name them."""
    for name, pattern in w.metrics.items():
        require(bool(_NAME_RE.match(str(name))), f"workload.metrics.{name}",
                 "name must use letters, digits, '.', '_', '-'", pattern)
        try:
            groups = re.compile(str(pattern)).groups
        except re.error:
            raise ConfigError(f"workload.metrics.{name}={pattern!r}: is not a valid regular expression") from None
        require(groups == 1, f"workload.metrics.{name}",
                 f"must have exactly one capture group (it has {groups}); use (?:...) for other groups", pattern)
    for name in w.units:
        require(name in w.metrics, f"workload.units.{name}", "names no figure in workload.metrics", w.units[name])


def mode_flag_value(mode: ModeConfig, flag: str) -> float:
    """The number a mode's ``workload_args`` give ``flag`` (``--flag=X`` or ``--flag X``); 0 when it passes none."""
    args = [str(a) for a in mode.workload_args]
    value = 0.0
    for i, arg in enumerate(args):
        text = (arg.split("=", 1)[1] if arg.startswith(flag + "=")
                else args[i + 1] if arg == flag and i + 1 < len(args) else None)
        if text is not None:
            try:
                value = float(text)
            except ValueError:
                raise ConfigError(f"mode.workload_args: {flag} {text!r} is not a number") from None
    return value


def validate_loop(cfg: DdpbenchConfig) -> None:
    """The job's loop: its host-sync pattern and collector setting fit the workload; a device wait needs a GPU."""
    w = cfg.workload
    own_loop = w.path is not None or w.framework is not None or w.name == "script"
    if own_loop and w.host_sync != HostSyncPattern.own:
        raise ConfigError(f"workload.host_sync={w.host_sync!r}: workload={w.name} runs its own loop (a framework "
                          "Trainer or the user's script), whose synchronisations are its own: only 'own'")
    if not own_loop and w.host_sync not in HARNESS_HOST_SYNCS:
        raise ConfigError(f"workload.host_sync={w.host_sync!r}: workload={w.name} runs ddpbench's loop: "
                          f"one of {', '.join(HARNESS_HOST_SYNCS)}")
    if own_loop and w.gc != GcMode.on:
        raise ConfigError(f"workload.gc={w.gc!r}: workload={w.name} runs its own loop; ddpbench sets the collector "
                          "in its own loop only")
    device_ms = mode_flag_value(cfg.mode, "--inject-device-step-ms")
    if device_ms > 0 and cfg.cluster.device == Device.cpu:
        raise ConfigError(f"mode={cfg.mode.name}: its device-side wait ({device_ms:g} ms per step, "
                          "inject.device_step_ms) is a GPU kernel; cluster.device=cpu has no GPU (a host-side wait: "
                          "mode=inject, inject.step_ms)")
    if device_ms > 0 and own_loop:
        raise ConfigError(f"mode={cfg.mode.name}: workload={w.name} runs its own loop; ddpbench queues a device "
                          "wait in its own loop only")


def validate_tool(tool: ToolConfig) -> None:
    """Check the tool.* settings; raise ConfigError naming the first broken key."""
    _at_least(0, tool.torch_profiler, "tool.torch_profiler", "wait", "warmup", "repeat")
    _at_least(1, tool.torch_profiler, "tool.torch_profiler", "active")
    _at_least(1, tool.pyspy, "tool.pyspy", "rate")
    require(bool(_NAME_RE.match(str(tool.wandb.project))), "tool.wandb.project",
             "must use letters, digits, '.', '_', '-'", tool.wandb.project)


def can_switch(cfg: DdpbenchConfig) -> bool:
    """Whether a trial of ``cfg`` can switch: its mode declares a switch and ddpbench's own loop runs the workload."""
    return cfg.mode.switch is not None and cfg.workload.path is None and cfg.workload.framework is None


def switches(cfg: DdpbenchConfig) -> bool:
    """Whether a trial of ``cfg`` switches: ``switching=blocks``, or ``auto`` where it can (:func:`can_switch`)."""
    return cfg.switching.kind == SwitchingKind.blocks or (cfg.switching.kind == SwitchingKind.auto and can_switch(cfg))


def validate_switching(cfg: DdpbenchConfig) -> None:
    """Check switching.*; with switching=blocks, refuse a mode or workload that cannot be switched (one line)."""
    sw, mode = cfg.switching, cfg.mode
    _at_least(1, sw, "switching", "block_steps")
    require(0 <= sw.washout_steps < sw.block_steps, "switching.washout_steps",
             f"must be >= 0 and < switching.block_steps={sw.block_steps}", sw.washout_steps)
    if sw.kind != SwitchingKind.blocks:
        return
    if mode.switch is None:
        raise ConfigError(f"switching=blocks: mode={mode.name} cannot be switched inside a trial "
                          "(its YAML declares no mode.switch; e.g. an outside sampler); use switching=none")
    if cfg.workload.path is not None or cfg.workload.framework is not None:
        raise ConfigError(f"switching=blocks: workload={cfg.workload.name} is not run by ddpbench's own loop; "
                          "only the built-in workloads (mlp, transformer, convnet) switch")


def switching_seed(cfg: DdpbenchConfig) -> int:
    """The seed the first block's side of this trial is drawn from."""
    sw = cfg.switching
    return sw.seed if sw.seed is not None else cfg.seed * 1000 + cfg.decided.repeat
