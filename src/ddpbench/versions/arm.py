"""A trial's arm of a version comparison: its environment, its interpreter, its command, its record.

``prepare`` runs before a sweep's first trial: every version's environment built (or found cached), the
package lists compared with the sweep's own, and each mode's command checked against its version's
launcher flags. The trial then asks :func:`python_for` (``{python}`` in the mode's command),
:func:`command_for` (the template, adapted by ``mode.command_by_version``) and :func:`arm_section`
(trial.json's ``arm``). A trial without ``version`` is the sweep's own install, exactly as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ddpbench.config import DdpbenchConfig, ModeConfig
from ddpbench.errors import ConfigError
from ddpbench.io import write_json_atomic
from ddpbench.versions import envs
from ddpbench.versions.spec import ToolSpec, parse_spec

#: the sweep's own package list and each environment's difference from it (computed once per process)
_SWEEP_PACKAGES: Dict[str, Dict[str, str]] = {}
_DIFFS: Dict[str, List[str]] = {}


def launch_dir() -> Path:
    """The directory ddpbench was run from (Hydra's ``runtime.cwd``; the process's cwd outside Hydra)."""
    from hydra.core.hydra_config import HydraConfig

    return Path(str(HydraConfig.get().runtime.cwd)) if HydraConfig.initialized() else Path.cwd()


def spec_of(cfg: DdpbenchConfig) -> Optional[ToolSpec]:
    """The trial's version spec resolved, or None for the sweep's own install."""
    if cfg.version is None:
        return None
    return parse_spec(cfg.version, str(cfg.mode.requires_package), launch_dir())


def env_for(cfg: DdpbenchConfig, say: Callable[[str], None] = print) -> Optional[envs.ToolEnv]:
    """The trial's environment (built now when not cached yet), or None for the sweep's own install."""
    spec = spec_of(cfg)
    return None if spec is None else envs.build(spec, cfg.mode.name, say, module=str(cfg.mode.requires or ""))


def python_for(cfg: DdpbenchConfig) -> str:
    """``{python}`` of the trial's command: its version's interpreter, else the sweep's."""
    env = env_for(cfg)
    return env.python if env is not None else sys.executable


def _matches(specifier: str, version: Optional[str]) -> bool:
    try:
        from packaging.specifiers import SpecifierSet
    except ImportError:  # pragma: no cover - packaging ships with pip and every ddpbench install
        return False
    try:
        return version is not None and SpecifierSet(specifier).contains(version, prereleases=True)
    except ValueError:
        raise ConfigError(f"mode.command_by_version: {specifier!r} is not a version specifier (e.g. '<0.5')") from None


def _by_version(table: Mapping[str, Sequence[Any]], default: Sequence[Any], version: Optional[str]) -> List[str]:
    """The first entry of ``table`` (version specifier -> argv) whose specifier matches ``version``, else ``default``."""
    for specifier, command in table.items():
        if _matches(str(specifier), version):
            return [str(token) for token in command]
    return [str(token) for token in default]


def template_for(mode: ModeConfig, version: Optional[str]) -> List[str]:
    """The command template of a mode at tool version ``version``: the first ``command_by_version`` match, else ``command``."""
    return _by_version(mode.command_by_version, mode.command, version)


def help_template_for(mode: ModeConfig, version: Optional[str]) -> List[str]:
    """The help command of a mode at tool version ``version``: the first ``help_command_by_version`` match, else
    ``help_command``."""
    return _by_version(mode.help_command_by_version, mode.help_command, version)


def check_tool_version(mode: ModeConfig, env: envs.ToolEnv) -> None:
    """Raise ConfigError when the arm's tool version is outside the versions the mode runs (``mode.tool_versions``)."""
    if mode.tool_versions and not _matches(mode.tool_versions, env.version):
        raise ConfigError(f"mode={mode.name}: {env.spec.package} {env.version} cannot run this mode: it runs "
                          f"{env.spec.package}{mode.tool_versions} (mode.tool_versions)")


def command_for(cfg: DdpbenchConfig) -> List[str]:
    """The trial's command template (its version's, when ``mode.command_by_version`` names one)."""
    if cfg.version is None or not cfg.mode.command_by_version:
        return [str(token) for token in cfg.mode.command]
    env = env_for(cfg)
    return template_for(cfg.mode, env.version if env is not None else None)


def env_for_version(cfg: DdpbenchConfig) -> Dict[str, str]:
    """The environment the trial's version adds (the first ``mode.env_by_version`` match; {} for none)."""
    if cfg.version is None or not cfg.mode.env_by_version:
        return {}
    env = env_for(cfg)
    for specifier, extra in cfg.mode.env_by_version.items():
        if _matches(str(specifier), env.version if env is not None else None):
            return {str(key): str(value) for key, value in extra.items()}
    return {}


def at_version(cfg: DdpbenchConfig) -> DdpbenchConfig:
    """``cfg`` as its version runs it: ``mode.switch`` replaced by the first ``mode.switch_by_version`` match
    (``cfg`` itself when nothing differs), so trial.json records what the switch leaves on at that version."""
    if cfg.version is None or not cfg.mode.switch_by_version or cfg.mode.switch is None:
        return cfg
    env = env_for(cfg)
    for specifier, switch in cfg.mode.switch_by_version.items():
        if _matches(str(specifier), env.version if env is not None else None):
            return dataclasses.replace(cfg, mode=dataclasses.replace(cfg.mode, switch=switch))
    return cfg


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


def check_flags(cfg: DdpbenchConfig, env: envs.ToolEnv) -> None:
    """Raise ConfigError naming the flag and the version when the arm's launcher lacks a flag of its command."""
    if not help_template_for(cfg.mode, env.version):
        return
    text = help_text(env, cfg.mode)
    if not text.strip():
        raise ConfigError(f"mode={cfg.mode.name}: {' '.join(help_template_for(cfg.mode, env.version)[1:])} printed "
                          f"nothing at {env.spec.package} {env.version}: that entry runs no launcher there (give "
                          f"those versions their own with mode.command_by_version and mode.help_command_by_version)")
    flags = template_flags(template_for(cfg.mode, env.version)) + template_flags([str(a) for a in cfg.mode.tool_args])
    for flag in flags:
        if not re.search(rf"(^|[\s,\[(]){re.escape(flag)}(?![\w-])", text):
            raise ConfigError(f"mode={cfg.mode.name}: {env.spec.package} {env.version} has no flag {flag} (its "
                              f"command template passes it; adapt it with mode.command_by_version)")


def sweep_packages(package: str) -> Dict[str, str]:
    """The sweep interpreter's own package list (first found wins, as imports do)."""
    if sys.executable not in _SWEEP_PACKAGES:
        _SWEEP_PACKAGES[sys.executable] = dict(envs.probe(sys.executable, package)["packages"])
    return _SWEEP_PACKAGES[sys.executable]


def _site_fingerprint(env: envs.ToolEnv) -> List[Any]:
    """The modification times of every site-packages folder either side sees: a package installed or removed
    there changes its folder's, so an unchanged fingerprint means unchanged package lists."""
    folders = [*envs.shared_site_dirs(), *map(str, env.dir.glob("lib/python*/site-packages"))]
    return [[folder, os.stat(folder).st_mtime_ns if os.path.isdir(folder) else None] for folder in folders]


def diff_of(env: envs.ToolEnv) -> List[str]:
    """How the environment's packages, the tool left out, differ from the sweep's ([] = identical).

    Listed once and kept in the environment's folder (``packages-check.json``) with the fingerprint of the
    site-packages folders; listed again only when that changed.
    """
    if env.spec.key in _DIFFS:
        return _DIFFS[env.spec.key]
    stored, fingerprint = env.dir / "packages-check.json", _site_fingerprint(env)
    try:
        kept = json.loads(stored.read_text())
    except (OSError, ValueError):
        kept = {}
    if kept.get("fingerprint") == fingerprint and kept.get("sweep_python") == sys.executable:
        _DIFFS[env.spec.key] = list(kept["diff"])
        return _DIFFS[env.spec.key]
    mine = dict(envs.probe(env.python, env.spec.package)["packages"])
    diff = envs.package_diff(mine, sweep_packages(env.spec.package), env.spec.package)
    write_json_atomic(stored, {"fingerprint": fingerprint, "sweep_python": sys.executable, "diff": diff})
    _DIFFS[env.spec.key] = diff
    return diff


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
        check_flags(cfg, env)
        diff = diff_of(env)
        if diff:
            say(f"ddpbench: versions: {cfg.mode.name}: {len(diff)} package(s) besides {spec.package} differ from "
                f"the sweep's: {diff[0]}")
        done[(spec.key, cfg.mode.name)] = env


def arm_section(cfg: DdpbenchConfig, ranks: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """trial.json's ``arm``: the spec, the version the ranks imported, the environment and its package check."""
    spec = spec_of(cfg)
    if spec is None:
        return None
    env = envs.ready(spec)
    imported: List[Dict[str, Any]] = [r["tool"] for r in ranks if isinstance(r.get("tool"), dict)]
    versions = sorted({str(t.get("version")) for t in imported if t.get("version")})
    diff = diff_of(env) if env is not None else None
    return {
        "mode": str(cfg.mode.name).split("==")[0].split("@")[0].split("[")[0],
        "spec": spec.raw,
        "kind": spec.kind,
        "package": spec.package,
        "version": versions[0] if len(versions) == 1 else (", ".join(versions) or None),
        "installed": env.version if env is not None else None,
        "env": str(env.dir) if env is not None else None,
        "python": env.python if env is not None else None,
        "same_packages": diff == [] if diff is not None else None,
        "package_diff": diff,
        "unmet_requirements": env.meta.get("unmet_requirements") if env is not None else None,
    }
