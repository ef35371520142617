"""The user's own training script (``workload=script``, docs/workload.md): whether the trial runs one, where it is,
its arguments, the frameworks it imports (read from its source, not run) and the environment that attaches
ddpbench's recorder to it from outside (the site hook first on the ranks' ``PYTHONPATH``)."""

from __future__ import annotations

import ast
import os
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Tuple

from ddpbench.config import DdpbenchConfig
from ddpbench.errors import ConfigError
from ddpbench.io import launch_dir
from ddpbench.workload import recorder
from ddpbench.workload.frameworks import ENV_HOOK, SITE_HOOK_DIR

#: top-level module a script imports -> the package that provides it
FRAMEWORKS = {"transformers": "transformers", "lightning": "lightning", "pytorch_lightning": "pytorch-lightning"}


def is_user_script(cfg: DdpbenchConfig) -> bool:
    """Whether the workload is a user's own script (``workload.path`` set) rather than a built-in one."""
    return cfg.workload.path is not None


def script_args(cfg: DdpbenchConfig) -> List[str]:
    """``workload.args`` as an argv list: a list as it is, one string split as a shell would (shlex)."""
    args = cfg.workload.args
    if args is None:
        return []
    if isinstance(args, str):
        try:
            return shlex.split(args)
        except ValueError as error:
            raise ConfigError(f"workload.args={args!r}: cannot be split as a shell would: {error}") from None
    return [str(arg) for arg in args]


def script_file(cfg: DdpbenchConfig) -> Path:
    """The absolute path of the user's script: ``workload.path`` resolved against :func:`ddpbench.io.launch_dir`."""
    return (launch_dir() / os.path.expanduser(cfg.workload.path or "")).resolve()


@lru_cache(maxsize=32)
def _imported_frameworks(path: str, mtime_ns: int) -> Tuple[str, ...]:
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return ()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return tuple(sorted(name for name in names if name in FRAMEWORKS))


def script_frameworks(cfg: DdpbenchConfig) -> Tuple[str, ...]:
    """The frameworks a user's script imports (anywhere in its source); () for a built-in workload."""
    if not is_user_script(cfg):
        return ()
    path = script_file(cfg)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return ()
    return _imported_frameworks(str(path), mtime)


def records_enabled(cfg: DdpbenchConfig) -> bool:
    """Whether a user's script gets ddpbench's recorder: ``workload.records``, or (null) a framework is imported."""
    if not is_user_script(cfg):
        return False
    records = cfg.workload.records
    return bool(script_frameworks(cfg)) if records is None else bool(records)


def records_required(cfg: DdpbenchConfig) -> bool:
    """Whether a trial without rank records has failed: records asked for explicitly (``workload.records=true``;
    with null, a framework the recorder cannot attach to leaves the trial its wall-time figures)."""
    return is_user_script(cfg) and cfg.workload.records is True


def recorder_environment(cfg: DdpbenchConfig, metrics_dir: str, pythonpath: str) -> Dict[str, str]:
    """What ``ddpbench.workload.recorder`` and its site hook need in a user's script with records on (``PYTHONPATH``:
    the hook, then ``pythonpath``); else nothing."""
    if not records_enabled(cfg):
        return {}
    stop, fault = cfg.stop, cfg.fault
    env = recorder.environment(
        metrics_dir, warmup_steps=stop.warmup_steps, save_step_times=bool(cfg.trial.save_step_times),
        workload=script_file(cfg).name, steps=stop.steps if stop.kind == "steps" and not stop.from_script else None,
        duration_s=stop.duration_sec if stop.kind == "duration" else None, check_every=stop.check_every,
        clock_skew_s=fault.clock_skew_sec, fault_rank=fault.rank,
    )
    hooked = [str(SITE_HOOK_DIR)] + [p for p in pythonpath.split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join(hooked), ENV_HOOK: "1"}
