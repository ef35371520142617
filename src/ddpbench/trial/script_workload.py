"""The user's own training script (``workload=script``): where it is, its arguments, what it may do.

``workload.path`` names the script, relative to the directory ddpbench was run from; ``workload.args``
are its own arguments (a list, or one string split as a shell would); ``workload.metrics`` patterns
(any workload) must each have exactly one capture group. :func:`check_script_workload` refuses, in one
line, what a built-in workload honours and a plain script cannot (faults, injection, phase timing,
the lockstep stop without ddpbench's recorder). Everything here runs before anything is launched.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from pathlib import Path
from typing import Any, List, Optional

from ddpbench.config import DdpbenchConfig, WorkloadConfig

from ddpbench.errors import ConfigError
from ddpbench.formats.condition import arm_name

_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


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


def launch_dir() -> Path:
    """The directory the user ran ddpbench from (Hydra's ``runtime.cwd``; the process's cwd outside Hydra)."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return Path(str(HydraConfig.get().runtime.cwd))
    return Path.cwd()


def script_file(cfg: DdpbenchConfig) -> Path:
    """The absolute path of the user's script: ``workload.path`` resolved against :func:`launch_dir`."""
    return (launch_dir() / os.path.expanduser(cfg.workload.path or "")).resolve()


def metric_group_count(pattern: str) -> Optional[int]:
    """Capture groups of a regular expression, or None when it does not compile."""
    try:
        return re.compile(pattern).groups
    except re.error:
        return None


def _require(condition: bool, key: str, rule: str, value: Any) -> None:
    if not condition:
        raise ConfigError(f"{key}={value!r}: {rule}")


def _check_metrics(w: WorkloadConfig) -> None:
    for name, pattern in w.metrics.items():
        _require(bool(_NAME_RE.match(str(name))), f"workload.metrics.{name}",
                 "name must use letters, digits, '.', '_', '-'", pattern)
        groups = metric_group_count(str(pattern))
        _require(groups is not None, f"workload.metrics.{name}", "is not a valid regular expression", pattern)
        _require(groups == 1, f"workload.metrics.{name}",
                 f"must have exactly one capture group (it has {groups}); use (?:...) for other groups", pattern)
    for name in w.units:
        _require(name in w.metrics, f"workload.units.{name}", "names no figure in workload.metrics", w.units[name])


def _script_refusal(cfg: DdpbenchConfig) -> Optional[str]:
    """What a built-in workload honours and a user's script cannot, when the config asks for it: ``key=value: why``."""
    from ddpbench.trial.frameworks import records_enabled

    f, s, records = cfg.fault, cfg.stop, records_enabled(cfg)
    for key in ("crash_at_step", "hang_at_step"):
        if getattr(f, key) is not None:
            return f"fault.{key}={getattr(f, key)!r}: fault injection needs a built-in workload"
    if (f.clock_skew_sec or f.rank is not None) and not records:  # the recorder's stop clock honours the skew
        key = "clock_skew_sec" if f.clock_skew_sec else "rank"
        return f"fault.{key}={getattr(f, key)!r}: fault injection needs a built-in workload or ddpbench's recorder"
    if cfg.mode.workload_args:
        return f"mode={cfg.mode.name}: the mode adds ddpbench's own workload flags, which a user's script does not take"
    if cfg.timing != "step":
        return f"timing={cfg.timing!r}: phase timing needs a built-in workload"
    if cfg.data.loader != "synthetic":
        return f"data.loader={cfg.data.loader!r}: the script's own arguments choose its data loader"
    if s.kind == "duration" and not records:
        return ("stop=duration: the lockstep duration stop needs the script to use ddpbench's recorder "
                "(workload.records=true)")
    if not s.sync:
        return "stop.sync=false: the unsynced stop needs a built-in workload"
    if records and not cfg.cluster.shared_dir:
        return "cluster.shared_dir=false: workload.records=true needs the metrics dir on storage every node sees"
    return None


def check_script_workload(cfg: DdpbenchConfig) -> None:
    """The rules of ``workload.path/args/metrics/units/records``: patterns, the script file, what a script cannot do."""
    from ddpbench.trial.frameworks import check_frameworks

    w = cfg.workload
    _check_metrics(w)
    if not is_user_script(cfg):
        _require(bool(w.script), "workload.path", "workload=script needs workload.path=PATH (your training script)",
                 w.path)
        _require(not script_args(cfg), "workload.args", "only applies with workload=script", w.args)
        _require(not w.records, "workload.records", "only applies with workload=script", w.records)
        check_frameworks(cfg)
        return
    _require(not w.script, "workload.path", f"a built-in workload runs workload.script={w.script!r}; use workload=script",
             w.path)
    script_args(cfg)
    path = script_file(cfg)
    _require(path.is_file(), "workload.path", f"no such file: {path}", w.path)
    check_frameworks(cfg)
    refusal = _script_refusal(cfg)
    if refusal is not None:
        raise ConfigError(f"workload=script with {refusal}")


JOB_DIRNAME_MAX = 200
"""Longest job folder name (bytes) :func:`job_dirname` keeps; longer ones end in a hash (NAME_MAX is 255)."""


def job_dirname(override_dirname: str, version: Optional[str] = None) -> str:
    """A job folder name from Hydra's ``override_dirname``: one path component, whatever the values hold.

    An arm at a tool ``version`` (``versions=``) is named by its mode: ``mode=traceml==0.4.2``.

    A script path or a pattern may contain ``/`` (``%2F`` here, ``%`` itself as ``%25``), and a long list of
    arguments may pass the file-name limit (then the name is cut and ends in a hash of the whole).
    """
    if version is not None:
        override_dirname = re.sub(r"(^|,)mode=([^,]+)(?=,|$)",
                                  lambda m: f"{m.group(1)}mode={arm_name(m.group(2), str(version))}", override_dirname)
    name = override_dirname.replace("%", "%25").replace("/", "%2F")
    encoded = name.encode("utf-8")
    if len(encoded) <= JOB_DIRNAME_MAX:
        return name
    digest = hashlib.sha256(encoded).hexdigest()[:16]
    return encoded[: JOB_DIRNAME_MAX - 17].decode("utf-8", "ignore") + "-" + digest
