"""What one trial's config decides beyond its values, worked out once where the config is converted
(:func:`decide`) and read from :attr:`~ddpbench.config.schema.DdpbenchConfig.decided` from there on: the user's
script and what it imports, the CPU affinity, the repeat's number and the torch.distributed backend."""

from __future__ import annotations

import ast
import os
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Tuple

from ddpbench.choices import DistBackend
from ddpbench.config.checks import parse_repeat
from ddpbench.errors import ConfigError
from ddpbench.io import launch_dir
from ddpbench.workload.affinity import CpuSetting, parse_setting

if TYPE_CHECKING:  # pragma: no cover
    from ddpbench.config.schema import DdpbenchConfig

#: top-level module a script imports -> the package that provides it
FRAMEWORKS = {"transformers": "transformers", "lightning": "lightning", "pytorch_lightning": "pytorch-lightning"}


@dataclass(frozen=True)
class ScriptWorkload:
    """The workload as ``workload.path/args/records`` make it: a user's own script (``workload=script``,
    docs/workload.md) or a built-in workload (``file`` None)."""

    # the user's script, absolute (workload.path resolved against ddpbench.io.launch_dir); None: a built-in workload
    file: Optional[Path]
    # workload.args as an argv: a list as it is, one string split as a shell would (any workload: a built-in one
    # refuses them)
    args: Tuple[str, ...]
    # the frameworks the script imports anywhere in its source (read, not run), sorted; () for a built-in workload
    frameworks: Tuple[str, ...]
    # the script gets ddpbench's recorder: workload.records, or (null) a framework is imported
    records: bool
    # a trial without rank records has failed: records asked for explicitly (workload.records=true)
    records_required: bool

    @property
    def is_user_script(self) -> bool:
        """Whether the workload is a user's own script rather than a built-in one."""
        return self.file is not None


@dataclass(frozen=True)
class Decided:
    """What one trial's config decides beyond its values (see the module)."""

    script: ScriptWorkload
    # cluster.cpu_affinity parsed: auto, none or the CPU list (ddpbench.workload.affinity)
    cpu_affinity: CpuSetting
    # the trial's repeat label as its number (>= 1)
    repeat: int
    # cluster.backend on cluster.device (DistBackend.on): auto only where the device is auto (the rank decides)
    backend: DistBackend


def script_args(value: Any) -> Tuple[str, ...]:
    """``workload.args`` as an argv: a list as it is, one string split as a shell would (shlex); ConfigError."""
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as error:
            raise ConfigError(f"workload.args={value!r}: cannot be split as a shell would: {error}") from None
    return tuple(str(arg) for arg in value)


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


def imported_frameworks(file: Path) -> Tuple[str, ...]:
    """The frameworks (:data:`FRAMEWORKS`) the script ``file`` imports anywhere in its source; () when unreadable."""
    try:
        mtime = file.stat().st_mtime_ns
    except OSError:
        return ()
    return _imported_frameworks(str(file), mtime)


def script_workload(cfg: DdpbenchConfig) -> ScriptWorkload:
    """The workload of ``cfg`` as a :class:`ScriptWorkload`; ConfigError when ``workload.args`` cannot be split."""
    w = cfg.workload
    args = script_args(w.args)
    if w.path is None:
        return ScriptWorkload(file=None, args=args, frameworks=(), records=False, records_required=False)
    file = (launch_dir() / os.path.expanduser(w.path)).resolve()
    frameworks = imported_frameworks(file)
    records = bool(frameworks) if w.records is None else bool(w.records)
    return ScriptWorkload(file=file, args=args, frameworks=frameworks, records=records,
                          records_required=w.records is True)


def decide(cfg: DdpbenchConfig) -> Decided:
    """What ``cfg`` decides beyond its values; ConfigError (one line naming the key) for a repeat that is not one
    trial's number, a CPU affinity that does not parse or ``workload.args`` that do not split."""
    c = cfg.cluster
    try:
        affinity = parse_setting(c.cpu_affinity)
    except ValueError as error:
        raise ConfigError(f"cluster.cpu_affinity={c.cpu_affinity!r}: {error}") from None
    return Decided(script=script_workload(cfg), cpu_affinity=affinity, repeat=parse_repeat(cfg.repeat),
                   backend=DistBackend(c.backend).on(c.device))
