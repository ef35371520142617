"""A trial's arm of a version comparison: its environment, its interpreter, its command, its record.

:func:`prepare` builds and checks every version's environment before a sweep's first trial; a trial resolves
its arm once (:func:`resolve_arm`). A trial without ``version`` is the sweep's own install.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ddpbench.config import DdpbenchConfig, ModeConfig, ModeSwitchConfig
from ddpbench.errors import ConfigError
from ddpbench.formats.condition import base_mode
from ddpbench.io import launch_dir, write_json_atomic
from ddpbench.versions import envs
from ddpbench.versions.spec import ToolSpec, parse_spec

#: each environment's difference from the sweep's packages (computed once per process)
_DIFFS: Dict[str, List[str]] = {}


def spec_of(cfg: DdpbenchConfig) -> Optional[ToolSpec]:
    """The trial's version spec resolved, or None for the sweep's own install."""
    if cfg.version is None:
        return None
    return parse_spec(cfg.version, str(cfg.mode.requires_package), launch_dir())


def _matches(specifier: str, version: Optional[str]) -> bool:
    try:
        from packaging.specifiers import SpecifierSet
    except ImportError:  # pragma: no cover - packaging ships with pip and every ddpbench install
        return False
    try:
        return version is not None and SpecifierSet(specifier).contains(version, prereleases=True)
    except ValueError:
        raise ConfigError(f"mode.command_by_version: {specifier!r} is not a version specifier (e.g. '<0.5')") from None


def _first_match(table: Mapping[str, Any], version: Optional[str]) -> Any:
    """The value of the first version specifier in ``table`` that ``version`` matches, else None."""
    return next((value for specifier, value in table.items() if _matches(str(specifier), version)), None)


def _by_version(table: Mapping[str, Sequence[Any]], default: Sequence[Any], version: Optional[str]) -> List[str]:
    found = _first_match(table, version)
    return [str(token) for token in (default if found is None else found)]


def template_for(mode: ModeConfig, version: Optional[str]) -> List[str]:
    """A mode's command template at tool ``version``: the first ``command_by_version`` match, else ``command``."""
    return _by_version(mode.command_by_version, mode.command, version)


def help_template_for(mode: ModeConfig, version: Optional[str]) -> List[str]:
    """A mode's help command at tool ``version``: the first ``help_command_by_version`` match, else its own."""
    return _by_version(mode.help_command_by_version, mode.help_command, version)


def check_tool_version(mode: ModeConfig, env: envs.ToolEnv) -> None:
    """Raise ConfigError when the arm's tool version is outside the versions the mode runs (``mode.tool_versions``)."""
    if mode.tool_versions and not _matches(mode.tool_versions, env.version):
        raise ConfigError(f"mode={mode.name}: {env.spec.package} {env.version} cannot run this mode: it runs "
                          f"{env.spec.package}{mode.tool_versions} (mode.tool_versions)")


def template_flags(template: Sequence[str]) -> List[str]:
    """The ``--flags`` a command template passes to its tool (up to ``--args`` and the workload's own)."""
    flags: List[str] = []
    for token in template:
        token = str(token)
        if token in ("--args", "{workload_args}"):
            break
        if token.startswith("--") and len(token) > 2:
            flags.append(token.split("=", 1)[0])
    return list(dict.fromkeys(flags))


def help_text(env: envs.ToolEnv, mode: ModeConfig) -> str:
    """The tool launcher's help in ``env`` (``mode.help_command``, or its version's), run once and cached there."""
    argv = [str(token).replace("{python}", env.python) for token in help_template_for(mode, env.version)]
    cached = env.dir / f"help-{hashlib.sha256(chr(0).join(argv).encode()).hexdigest()[:12]}.txt"
    if cached.exists():
        return cached.read_text()
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ConfigError(f"mode={mode.name}: {' '.join(argv)} failed: {error}") from None
    if out.returncode != 0:
        raise ConfigError(f"mode={mode.name}: {' '.join(argv[1:])} exited with {out.returncode} at "
                          f"{env.spec.package} {env.version}")
    cached.write_text(out.stdout + out.stderr)
    return out.stdout + out.stderr


def check_flags(mode: ModeConfig, env: envs.ToolEnv) -> None:
    """Raise ConfigError naming the flag and the version when the arm's launcher lacks a flag of its command."""
    if not help_template_for(mode, env.version):
        return
    text = help_text(env, mode)
    if not text.strip():
        raise ConfigError(f"mode={mode.name}: {' '.join(help_template_for(mode, env.version)[1:])} printed "
                          f"nothing at {env.spec.package} {env.version}: that entry runs no launcher there (give "
                          f"those versions their own with mode.command_by_version and mode.help_command_by_version)")
    flags = template_flags(template_for(mode, env.version)) + template_flags([str(a) for a in mode.tool_args])
    for flag in flags:
        if not re.search(rf"(^|[\s,\[(]){re.escape(flag)}(?![\w-])", text):
            raise ConfigError(f"mode={mode.name}: {env.spec.package} {env.version} has no flag {flag} (its "
                              f"command template passes it; adapt it with mode.command_by_version)")


@functools.lru_cache(maxsize=None)
def sweep_packages(package: str) -> Dict[str, str]:
    """The sweep interpreter's own package list (first found wins, as imports do), probed once per process."""
    return dict(envs.probe(sys.executable, package)["packages"])


def diff_of(env: envs.ToolEnv) -> List[str]:
    """How the environment's packages, the tool left out, differ from the sweep's ([] = identical).

    Kept in the environment's ``packages-check.json`` until its site-packages folders change.
    """
    key = env.spec.key
    if key in _DIFFS:
        return _DIFFS[key]
    # every site-packages folder either side sees, with its modification time: unchanged, same package lists
    folders = [*envs.shared_site_dirs(), *map(str, env.dir.glob("lib/python*/site-packages"))]
    fingerprint = [[folder, os.stat(folder).st_mtime_ns if os.path.isdir(folder) else None] for folder in folders]
    stored = env.dir / "packages-check.json"
    try:
        kept = json.loads(stored.read_text())
    except (OSError, ValueError):
        kept = {}
    if kept.get("fingerprint") == fingerprint and kept.get("sweep_python") == sys.executable:
        _DIFFS[key] = list(kept["diff"])
    else:
        mine = dict(envs.probe(env.python, env.spec.package)["packages"])
        _DIFFS[key] = envs.package_diff(mine, sweep_packages(env.spec.package), env.spec.package)
        write_json_atomic(stored, {"fingerprint": fingerprint, "sweep_python": sys.executable, "diff": _DIFFS[key]})
    return _DIFFS[key]


def prepare(cfgs: Sequence[DdpbenchConfig], say: Callable[[str], None] = print) -> None:
    """Before the first trial: every arm's environment built or found, its packages compared, its flags checked.

    Raises ConfigError (one line naming the spec, or the flag and the version) before anything runs.
    """
    done: Dict[Any, envs.ToolEnv] = {}
    for cfg in cfgs:
        spec = spec_of(cfg)
        if spec is None or (spec.key, cfg.mode.name) in done:
            continue
        cached = envs.ready(spec)
        env = envs.build(spec, cfg.mode.name, say, module=str(cfg.mode.requires or ""))
        if cached is not None:
            say(f"ddpbench: versions: {cfg.mode.name} ready (cached: {spec.package} {env.version}, {env.dir})")
        check_tool_version(cfg.mode, env)
        check_flags(cfg.mode, env)
        diff = diff_of(env)
        if diff:
            say(f"ddpbench: versions: {cfg.mode.name}: {len(diff)} package(s) besides {spec.package} differ from "
                f"the sweep's: {diff[0]}")
        done[(spec.key, cfg.mode.name)] = env


@dataclasses.dataclass(frozen=True)
class Arm:
    """A trial's arm, resolved once: what runs its command and what it records."""

    # the trial's version spec (None: the sweep's own install)
    spec: Optional[ToolSpec]
    # the version's environment (None: the sweep's own install)
    env: Optional[envs.ToolEnv]
    # ``{python}`` of the command: the environment's interpreter, else the sweep's
    python: str
    # the mode's command template at this version (the first ``mode.command_by_version`` match, else ``mode.command``)
    command: List[str]
    # what the version adds to the agents' environment (the first ``mode.env_by_version`` match; placeholders unfilled)
    environment: Dict[str, str]
    # ``mode.switch`` at this version (the first ``mode.switch_by_version`` match)
    switch: Optional[ModeSwitchConfig]

    def configured(self, cfg: DdpbenchConfig) -> DdpbenchConfig:
        """``cfg`` with this arm's ``mode.switch`` (``cfg`` itself when nothing differs)."""
        if self.switch == cfg.mode.switch:
            return cfg
        return dataclasses.replace(cfg, mode=dataclasses.replace(cfg.mode, switch=self.switch)).deciding(cfg.decided)

    def section(self, mode: str, ranks: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
        """trial.json's ``arm``: the spec, the version the ranks imported, the environment and its package check."""
        spec, env = self.spec, self.env
        if spec is None or env is None:
            return None
        imported: List[Dict[str, Any]] = [r["tool"] for r in ranks if isinstance(r.get("tool"), dict)]
        versions = sorted({str(t.get("version")) for t in imported if t.get("version")})
        diff = diff_of(env)
        return {"mode": base_mode(mode), "spec": spec.raw, "kind": spec.kind, "package": spec.package,
                "version": versions[0] if len(versions) == 1 else (", ".join(versions) or None),
                "installed": env.version, "env": str(env.dir), "python": env.python, "same_packages": diff == [],
                "package_diff": diff, "unmet_requirements": env.meta.get("unmet_requirements")}


def resolve_arm(cfg: DdpbenchConfig, say: Callable[[str], None] = print) -> Arm:
    """The trial's arm: for a ``version``, its environment (built now when not cached yet) and what that version
    runs; else the sweep's own interpreter and the mode as it is."""
    mode, spec = cfg.mode, spec_of(cfg)
    if spec is None:
        return Arm(None, None, sys.executable, [str(token) for token in mode.command], {}, mode.switch)
    env = envs.build(spec, mode.name, say, module=str(mode.requires or ""))
    extra = _first_match(mode.env_by_version, env.version) or {}
    switch = (_first_match(mode.switch_by_version, env.version) or mode.switch) if mode.switch is not None else None
    return Arm(spec, env, env.python, template_for(mode, env.version),
               {str(key): str(value) for key, value in extra.items()}, switch)
