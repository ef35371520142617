"""What a trial ran on: versions and hardware, for trial.json's ``environment``. The driver never imports torch
(seconds of start-up per trial): torch, CUDA, NCCL and GPU facts come from the ranks' own records."""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence

import ddpbench


def _version(package: str) -> Optional[str]:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def git_commit() -> Optional[str]:
    """The commit of the ddpbench checkout in use ('<sha>-dirty' with local changes), or None."""
    source = Path(ddpbench.__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=source,
                               capture_output=True, text=True, timeout=5)
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


@functools.lru_cache(maxsize=1)
def cpu_model() -> Optional[str]:
    """The CPU's model name from /proc/cpuinfo, else platform.processor()."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def describe(ranks: Sequence[Mapping[str, Any]], node_hostnames: Sequence[str]) -> Dict[str, Any]:
    """The environment section of a trial record."""
    first = ranks[0] if ranks else {}
    tool = first.get("tool")
    traceml = tool.get("version") if isinstance(tool, dict) and tool.get("package") == "traceml-ai" else None
    hostnames = sorted({*node_hostnames, *(str(r["hostname"]) for r in ranks if r.get("hostname"))})
    return {
        "hostnames": hostnames,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": first.get("torch_version") or _version("torch"),
        "cuda": first.get("cuda_version"),
        "nccl": first.get("nccl_version"),
        "gpu_names": sorted({str(r["gpu_name"]) for r in ranks if r.get("gpu_name")}),
        "traceml_ai": str(traceml) if traceml else _version("traceml-ai"),  # as the ranks imported it, else here
        "tool": tool,
        "ddpbench": ddpbench.__version__,
        "git_commit": git_commit(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
    }
