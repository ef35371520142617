"""Run the real ddpbench command line in a subprocess, and find processes a run left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from helpers.processes import wait_for

#: the override for a test of the sweep (resume, signals, integrity, the report), not of DDP between ranks: a
#: trial of one rank is still a real torchrun job, at about two thirds of the CPU of two ranks
ONE_RANK = "cluster.nproc_per_node=1"
#: what the tests' runs get unless they set it: within-trial switching off. The default (switching=auto) switches
#: every built-in workload's trial, which changes what a tool sees (TraceML's trace_step wraps the on-blocks only);
#: the tests of switching set it, and test_app runs the main command's defaults as they are
PINNED = ("switching=none",)
#: arguments after which nothing runs (no overrides to pin)
_NO_RUN = ("--help", "--hydra-help", "--version", "--info", "-h")


def pinned(args: Sequence[str], first: bool = True) -> List[str]:
    """``args`` with :data:`PINNED` added beside the first override (Hydra's parser wants its overrides together),
    or last (``first`` False: a command whose first arguments are positional), unless they set switching
    themselves or run nothing."""
    if any(a in _NO_RUN for a in args) or any(a.split("=", 1)[0].lstrip("+~").startswith("switching") for a in args):
        return list(args)
    at = next((i for i, a in enumerate(args) if "=" in a and not a.startswith("-")), len(args)) if first else len(args)
    return [*args[:at], *PINNED, *args[at:]]


@dataclass
class CliRun:
    """Exit code and output of one ddpbench invocation."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"


def cli_env(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The test environment for ddpbench: no inherited TraceML or Hydra error settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEML_", "HYDRA_FULL_ERROR"))}
    env.update(extra or {})
    return env


def processes_mentioning(marker: str) -> List[int]:
    """Live (non-zombie) processes whose command line contains ``marker``, except this one."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry))
    return found


def kill_all(pids: Sequence[int]) -> None:
    """SIGKILL ``pids`` (cleanup after a failed assertion)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def assert_nothing_left(marker: str, grace_s: float = 3.0) -> None:
    """Fail (after cleaning up) if a process mentioning ``marker`` outlives ``grace_s``."""
    try:
        wait_for(lambda: not processes_mentioning(marker), grace_s, f"no process mentioning {marker}")
        return
    except AssertionError:
        left = processes_mentioning(marker)
    if left:
        details = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:200] for pid in left
                   if Path(f"/proc/{pid}").exists()]
        kill_all(left)
        raise AssertionError(f"processes left behind: {details}")


def run_ddpbench(args: Sequence[str], cwd: Path, timeout: float = 300, env: Optional[Mapping[str, str]] = None,
                 module: str = "ddpbench", pin: bool = True) -> CliRun:
    """Run ``python -m ddpbench ARGS`` (or ``-m module``: another of its commands) in ``cwd``, with
    :data:`PINNED` unless ``pin`` is False; kill its session if it outlives ``timeout``."""
    argv = pinned(args, module == "ddpbench") if pin else list(args)
    process = subprocess.Popen([sys.executable, "-m", module, *argv], cwd=cwd,
                               env=cli_env(env),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise AssertionError(f"{module} {' '.join(args)} ran past {timeout} s\n{stdout}\n{stderr}")
    return CliRun(process.returncode, stdout, stderr)


def trials_in(sweep_dir: Path) -> List[dict]:
    """Every trial.json below ``sweep_dir``, in job order."""
    trials = [json.loads(path.read_text()) for path in sweep_dir.glob("*/trial.json")]
    return sorted(trials, key=lambda t: t["job_num"])


def only_sweep_dir(cwd: Path) -> Path:
    """The single sweep dir a multirun created under ``cwd/outputs/multirun``."""
    dirs = [p for p in (cwd / "outputs" / "multirun").iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def start_ddpbench(args: Sequence[str], cwd: Path, prefix: Sequence[str] = (), env: Optional[Mapping[str, str]] = None,
                   log: Optional[Path] = None) -> subprocess.Popen:
    """Start ``[*prefix, python, -m, ddpbench, *args]`` in ``cwd`` in a session of its own, output to ``log``.

    ``prefix`` may run it elsewhere (``ip netns exec NS ...``) as long as each step execs the next,
    so the returned process is the driver itself.
    """
    out = open(log, "wb") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen([*prefix, sys.executable, "-m", "ddpbench", *pinned(args)], cwd=cwd, env=cli_env(env),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        if log is not None:
            out.close()  # type: ignore[union-attr]


def wait_or_kill(process: subprocess.Popen, timeout: float) -> int:
    """Wait for ``process``; SIGKILL its session and fail if it outlives ``timeout``."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        raise AssertionError(f"{process.args} ran past {timeout} s")
