"""Shared helpers of the sweep benchmarks (calibration, noise_floor, harness_overhead).

Machine description, load average, running the real ``python -m ddpbench`` command line in a
subprocess (own session, killed on timeout), a discarded warm-up trial, reading a sweep's
``analysis.json``, and what else ran during its trials (their ``load`` sections).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    """CPU model name (the same reading trial.json's environment uses)."""
    from ddpbench.trial.environment import cpu_model as model

    return model() or "unknown"




def load() -> str:
    """The 1/5/15-minute load averages, e.g. ``0.12 0.30 0.41``."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def machine_line() -> str:
    """``machine: <cpu>, <n> cores, Python x.y.z, Linux; torch x.y``."""
    try:
        import torch

        tv = torch.__version__
    except ImportError:  # pragma: no cover
        tv = "absent"
    return (f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{platform.system()}, torch {tv}")


def now_utc() -> str:
    """``YYYY-MM-DD HH:MM UTC``."""
    return f"{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC}"


def stamp() -> str:
    """A sweep-name suffix: ``YYYYmmdd-HHMMSS``."""
    return f"{_dt.datetime.now():%Y%m%d-%H%M%S}"


def env() -> dict[str, str]:
    """This environment without inherited TraceML or Hydra error settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("TRACEML_", "HYDRA_FULL_ERROR"))}


def run_cmd(cmd: Sequence[str], cwd: Path, timeout: float, environ: dict[str, str] | None = None,
            quiet: bool = False) -> tuple[int, float, str]:
    """Run ``cmd``; return (exit code, wall seconds on the monotonic clock, stderr tail).

    Runs in its own session; the whole group is killed if it outlives ``timeout``.
    """
    t0 = time.monotonic()
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=environ or env(), stdout=subprocess.DEVNULL if quiet else None,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RuntimeError(f"timed out after {timeout:.0f} s: {' '.join(cmd)}")
    wall = time.monotonic() - t0
    return proc.returncode, wall, (err or "")[-3000:]


def ddpbench(args: Sequence[str], cwd: Path, timeout: float = 3600, quiet: bool = True) -> float:
    """``python -m ddpbench ARGS`` in ``cwd``; raises on a non-zero exit; returns its wall seconds."""
    code, wall, err = run_cmd([sys.executable, "-m", "ddpbench", *args], cwd, timeout, quiet=quiet)
    if code != 0:
        raise RuntimeError(f"ddpbench {' '.join(args)} exited {code}:\n{err}")
    return wall


def warm_up(common: Sequence[str], cwd: Path, name: str) -> None:
    """One discarded native trial: the first trial after idle is slow (cold page cache, torch import)."""
    print(f"warm-up trial (discarded): {name}", file=sys.stderr, flush=True)
    ddpbench(["mode=native", *common, f"sweep_name={name}"], cwd)


def sweep(overrides: Sequence[str], cwd: Path, name: str) -> Path:
    """Run a multirun sweep named ``name`` in ``cwd``; return its sweep dir (which holds analysis.json)."""
    print(f"sweep: python -m ddpbench -m {' '.join(overrides)} sweep_name={name}", file=sys.stderr, flush=True)
    ddpbench(["-m", *overrides, f"sweep_name={name}"], cwd, quiet=False)
    out = cwd / "outputs" / "multirun" / name
    if not (out / "analysis.json").is_file():
        raise RuntimeError(f"no analysis.json in {out}")
    return out


def analysis(sweep_dir: Path) -> dict[str, Any]:
    """The sweep's analysis.json."""
    return json.loads((sweep_dir / "analysis.json").read_text())


def comparison(data: dict[str, Any], mode: str) -> dict[str, Any]:
    """The single comparison of ``mode`` in an analysis.json."""
    found = [c for c in data["comparisons"] if c["mode"] == mode]
    if len(found) != 1:
        raise RuntimeError(f"expected one {mode} comparison, found {len(found)}")
    return found[0]


def trials(sweep_dir: Path) -> list[dict[str, Any]]:
    """Every trial.json of a sweep, in job order."""
    out = [json.loads(p.read_text()) for p in sweep_dir.glob("*/trial.json")]
    return sorted(out, key=lambda t: t["job_num"])


def load_summary(sweep_dir: Path) -> str:
    """What else ran during a sweep's trials (their ``load`` sections): the 1-minute load range and
    the mean CPU share of processes outside the trials (foreign CPU s / (wall s x CPUs))."""
    loaded = [t for t in trials(sweep_dir) if t.get("load")]
    l1 = [x for t in loaded for x in (t["load"]["load1_start"], t["load"]["load1_end"]) if x is not None]
    if not l1:
        return "load n/a"
    shares = [t["load"]["foreign_cpu_s"] / (t["wall_s"] * t["load"]["n_cpus"]) for t in loaded
              if t["load"]["foreign_cpu_s"] is not None and t.get("wall_s")]
    share = f", foreign CPU {100 * sum(shares) / len(shares):.0f} %" if shares else ""
    return f"load {min(l1):.1f}-{max(l1):.1f}{share}"


def write_out(path: Path | None, text: str, data: dict[str, Any]) -> None:
    """Write the table as markdown, or ``data`` as JSON when ``path`` ends in .json."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    else:
        path.write_text(text)


def emit(lines: list[str], path: Path | None) -> None:
    """Print a pure benchmark's table and write it to ``path`` (markdown, or ``{"lines": ...}`` as .json)."""
    text = "\n".join(lines) + "\n"
    print(text)
    write_out(path, text, {"lines": lines})


def signed(x: float | None, digits: int = 2) -> str:
    """``x`` with its sign and ``digits`` decimals, ``n/a`` when missing or not finite."""
    import math

    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.{digits}f}"


def add_sweep_arguments(parser: "argparse.ArgumentParser", repeats_help: str) -> None:
    """The options every sweep benchmark takes: --repeats, --model, --extra, --workdir, --no-warmup, --out."""
    parser.add_argument("--repeats", type=int, default=5, help=repeats_help)
    parser.add_argument("--model", default="small", help="model config (CPU default: small)")
    parser.add_argument("--extra", nargs="*", default=[], help="more Hydra overrides, e.g. stop.steps=400")
    parser.add_argument("--workdir", type=Path, default=Path.cwd(), help="where outputs/ goes (default: cwd)")
    parser.add_argument("--no-warmup", action="store_true", help="skip the discarded warm-up trial")
    parser.add_argument("--out", type=Path, default=None, help="also write the table (.md) or the data (.json)")
