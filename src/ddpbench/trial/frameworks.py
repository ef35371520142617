"""Framework scripts (HF ``Trainer``, Lightning): which frameworks a user's script imports, whether
ddpbench's recorder is on for it, and the environment that attaches the recorder from outside the script.

``workload.records`` null (the default) means: on when the script imports ``transformers``,
``lightning`` or ``pytorch_lightning`` (read from its source, not run), off otherwise. With records
on, every rank gets :data:`ddpbench.workload.frameworks.SITE_HOOK_DIR` first on ``PYTHONPATH``: the
hook adds ddpbench's callback to the script's Trainer, in every mode alike.
"""

from __future__ import annotations

import ast
import os
from functools import lru_cache
from pathlib import Path
from typing import Dict, Mapping, Tuple

from ddpbench.config import DdpbenchConfig
from ddpbench.trial.script_workload import is_user_script, script_file
from ddpbench.workload.frameworks import ENV_HOOK, SITE_HOOK_DIR

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


def hook_environment(cfg: DdpbenchConfig, env: Mapping[str, str]) -> Dict[str, str]:
    """``PYTHONPATH`` (the hook first) and the hook's switch for a script with records on; else nothing."""
    if not records_enabled(cfg):
        return {}
    path = [str(SITE_HOOK_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(path), ENV_HOOK: "1"}
