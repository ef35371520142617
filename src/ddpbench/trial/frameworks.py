"""Framework scripts (HF ``Trainer``, Lightning): which frameworks a user's script imports, whether
ddpbench's recorder is on for it, and the environment that attaches the recorder from outside the script.

``workload.records`` null (the default) means: on when the script imports ``transformers``,
``lightning`` or ``pytorch_lightning`` (read from its source, not run), off otherwise. With records
on, every rank gets :data:`ddpbench.workload.frameworks.SITE_HOOK_DIR` first on ``PYTHONPATH``: the
hook adds ddpbench's callback to the script's Trainer, in every mode alike.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple

from ddpbench.config import DdpbenchConfig

from ddpbench.errors import ConfigError
from ddpbench.trial.script_workload import is_user_script, script_file
from ddpbench.workload.frameworks import ENV_HOOK, ENV_TOOL, ENV_TRACEML_CALLBACK, SITE_HOOK_DIR

FRAMEWORKS = {"transformers": "transformers", "lightning": "lightning", "pytorch_lightning": "pytorch-lightning"}
"""Top-level module a script imports -> the package that provides it."""


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
    """Whether a trial without rank records has failed: records asked for explicitly (``workload.records=true``).

    With the default (null) a framework the recorder cannot attach to leaves the trial its wall-time figures.
    """
    return is_user_script(cfg) and cfg.workload.records is True


def _builtin_refusal(cfg: DdpbenchConfig) -> Optional[str]:
    """What a built-in framework workload (``workload.framework`` set) cannot do: ``key=value: why``, or None."""
    if cfg.timing != "step":
        return f"timing={cfg.timing!r}: the Trainer's step is the framework's own, not split into phases by ddpbench"
    if cfg.data.loader != "synthetic":
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
    framework = cfg.workload.framework
    if framework:
        refusal = _builtin_refusal(cfg)
        if refusal is not None:
            raise ConfigError(f"workload={cfg.workload.name} with {refusal}")
    for name in (framework,) if framework else script_frameworks(cfg):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            user = f"workload.path={cfg.workload.path!r}: the script imports" if not framework else \
                f"workload={cfg.workload.name}: trains with"
            raise ConfigError(f"{user} {name}, which is not installed (pip install {FRAMEWORKS.get(name, name)}, "
                              "or ddpbench[frameworks])")
    through = [key for key in (ENV_TOOL, ENV_TRACEML_CALLBACK) if key in cfg.mode.env]
    if through and not (framework or (records_enabled(cfg) and script_frameworks(cfg))):
        raise ConfigError(f"mode={cfg.mode.name}: attaches its tool to a framework Trainer ({through[0]}); "
                          f"workload={cfg.workload.name} has none (use workload=hf_trainer, lightning or a framework script)")
    if cfg.stop.from_script and not script_frameworks(cfg):
        raise ConfigError("stop.from_script=true: keeps a framework Trainer's own max_steps; the script imports "
                          "no framework (transformers, lightning)")


def hook_environment(cfg: DdpbenchConfig, env: Mapping[str, str]) -> Dict[str, str]:
    """``PYTHONPATH`` (the hook first) and the hook's switch for a script with records on; else nothing."""
    if not records_enabled(cfg):
        return {}
    path = [str(SITE_HOOK_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(path), ENV_HOOK: "1"}
