"""The commit range of a bisection (``git rev-list --first-parent GOOD..BAD``, oldest first), read from the tool's
git repository."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import List, Tuple

from ddpbench.errors import ConfigError

GIT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Commit:
    """One commit: its full hash and the first line of its message; ``short``: the 12 hex digits shown."""

    commit: str
    subject: str

    @property
    def short(self) -> str:
        return self.commit[:12]


def _git(repo: Path, *args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ConfigError(f"bisect: git cannot read {repo}: {error}") from None
    if out.returncode != 0:
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        raise ConfigError(f"bisect: git {' '.join(args)} in {repo}: {(lines or ['failed'])[-1].strip()}")
    return out.stdout


def split_ref(text: str, base_dir: Path) -> Tuple[Path, str]:
    """``REPO@REF`` as (the repository's folder, resolved against ``base_dir``; the ref); ConfigError when it is not one."""
    if "@" not in text:
        raise ConfigError(f"bisect: {text!r} is not REPO@REF (a git repository and a commit, tag or branch in it)")
    where, ref = text.rsplit("@", 1)
    repo = (base_dir / os.path.expanduser(where or ".")).resolve()
    if not ref or not (repo / ".git").exists():
        raise ConfigError(f"bisect: {text}: {repo} is not a git repository with a ref after '@' (REPO@REF)")
    return repo, ref


def resolve(repo: Path, ref: str) -> Commit:
    """The commit ``ref`` names in ``repo`` now; ConfigError when it names none."""
    try:
        commit = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    except ConfigError:
        raise ConfigError(f"bisect: {repo}@{ref}: no commit {ref!r} in {repo}") from None
    return Commit(commit, _git(repo, "log", "-1", "--format=%s", commit).strip())


def commit_range(repo: Path, good: Commit, bad: Commit) -> List[Commit]:
    """The commits after ``good`` up to ``bad``, first-parent, oldest first; ConfigError when there are none
    or ``good`` is not an ancestor of ``bad``."""
    if good.commit == bad.commit:
        raise ConfigError(f"bisect: good and bad are the same commit ({good.short}): nothing to bisect")
    ancestor = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", good.commit, bad.commit],
                              capture_output=True, timeout=GIT_TIMEOUT_S)
    if ancestor.returncode != 0:
        raise ConfigError(f"bisect: the good commit {good.short} is not an ancestor of the bad commit {bad.short}")
    lines = _git(repo, "rev-list", "--first-parent", "--reverse", "--format=%H %s", f"{good.commit}..{bad.commit}")
    commits = [Commit(sha, subject) for line in lines.splitlines() if not line.startswith("commit ")
               for sha, _, subject in [line.partition(" ")]]
    if not commits or commits[-1].commit != bad.commit:
        raise ConfigError(f"bisect: the bad commit {bad.short} is not on the first-parent line after {good.short}")
    return commits
