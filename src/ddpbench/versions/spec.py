"""A tool version spec (``versions={traceml:[0.4.2, dist/x.whl, ../checkout, ../repo@v2]}``) as what pip installs.

Kinds: ``pypi`` (``0.4.2`` -> ``traceml-ai==0.4.2``, or a requirement ``traceml-ai<0.5``), ``wheel`` (a ``.whl``
file), ``tree`` (a folder with pyproject.toml or setup.py) and ``git`` (``path@ref`` of a local repository, at the
commit ``ref`` names then); each spec's ``key`` caches its environment (docs/versions.md).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ddpbench.errors import ConfigError
from ddpbench.formats.condition import is_plain_version


@dataclass(frozen=True)
class ToolSpec:
    """One version spec, resolved: what the user wrote, what pip installs, and its cache key."""

    # the spec as written in versions=
    raw: str
    # pypi | wheel | tree | git
    kind: str
    # the distribution the spec installs (the mode's requires_package)
    package: str
    # the argument handed to the installer (a requirement, a file, a folder, a git+file URL)
    target: str
    # the content fingerprint (wheel hash, tree fingerprint, commit); "" for PyPI
    fingerprint: str

    @property
    def key(self) -> str:
        """The environment's cache key: 16 hex digits of the spec, its content and the sweep's interpreter."""
        text = "\n".join([self.kind, self.package, self.target, self.fingerprint, sys.version, sys.prefix])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_fingerprint(root: Path) -> str:
    """A hash of a source tree's file names, sizes and modification times (no .git, caches or build output)."""
    digest = hashlib.sha256()
    skip = {".git", "__pycache__", "build", "dist", ".venv", ".tox", ".eggs"}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip and not d.endswith(".egg-info"))
        for name in sorted(files):
            stat = os.stat(os.path.join(folder, name))
            digest.update(f"{os.path.relpath(os.path.join(folder, name), root)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _git_commit(repo: Path, ref: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ConfigError(f"versions: {repo}@{ref}: git cannot read it: {error}") from None
    if out.returncode != 0:
        raise ConfigError(f"versions: {repo}@{ref}: no commit {ref!r} in the git repository {repo}")
    return out.stdout.strip()


def parse_spec(raw: str, package: str, base_dir: Path) -> ToolSpec:
    """Resolve one spec for the distribution ``package``; paths are relative to ``base_dir`` (where ddpbench ran).

    Raises ConfigError (one line naming the spec) for a spec that is none of the kinds, a missing file
    or a git ref that does not resolve. Whether a PyPI version exists is known only when it is installed.
    """
    text = str(raw).strip()
    if not text:
        raise ConfigError(f"versions: an empty version spec for {package}")
    if is_plain_version(text):
        return ToolSpec(text, "pypi", package, f"{package}=={text.lstrip('v')}", "")
    path = (base_dir / os.path.expanduser(text)).resolve()
    if text.endswith(".whl"):
        if not path.is_file():
            raise ConfigError(f"versions: {text}: no such wheel file ({path})")
        return ToolSpec(text, "wheel", package, str(path), _file_hash(path))
    if path.is_dir():
        if not ((path / "pyproject.toml").exists() or (path / "setup.py").exists()):
            raise ConfigError(f"versions: {text}: the folder {path} is no source tree (no pyproject.toml or setup.py)")
        return ToolSpec(text, "tree", package, str(path), tree_fingerprint(path))
    if "@" in text and not text.startswith(package):
        where, ref = text.rsplit("@", 1)
        repo = (base_dir / os.path.expanduser(where)).resolve()
        if (repo / ".git").exists():
            commit = _git_commit(repo, ref)
            return ToolSpec(text, "git", package, f"{package} @ git+file://{repo}@{commit}", commit)
        raise ConfigError(f"versions: {text}: {repo} is not a git repository (path@ref needs one)")
    named = text.lower().replace("_", "-").startswith(package.lower())
    if named or any(op in text for op in "<>=!~"):
        return ToolSpec(text, "pypi", package, text if named else f"{package}{text}", "")
    raise ConfigError(f"versions: {text!r} is not a version, a requirement, a wheel file, a source tree or "
                      f"path@ref of a git repository")
