"""How long the test suite takes on this machine, and where its CPU goes.

Runs the README's test command (default ``python -m pytest -q -n 3``) and reports its wall time against
the goal, the machine's busy CPU time over the run (``/proc/stat``: user + nice + system + irq + softirq,
summed over CPUs), the mean number of busy CPUs, and the **CPU floor**: busy CPU seconds / CPUs, the wall
time the suite needs even with every CPU busy for the whole run. When the floor is above the goal, no
scheduling meets the goal; only less CPU does.

As root with ``accton`` (Debian/Ubuntu: ``apt-get install acct``), every process that ended during the
run is also counted by kind, from the kernel's process accounting (version 3 records: CPU per process,
pid, parent) joined with the command lines sampled from ``/proc`` every ``--sample-s`` seconds:
training ranks (the children of a launcher), launchers (torchrun's agent), the tool's own processes
(``traceml``, py-spy), ddpbench drivers, reports, environment builds (pip, uv, build, venv), Ray, SLURM,
pytest itself, and the rest. Accounting is switched off again at the end; run it where nothing else
uses accounting.

    python benchmarks/suite_time.py --out suite_time.md
    python benchmarks/suite_time.py --goal-min 2 -- -q -n 3 -m "not slow and not slurm"
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, load, machine_line, now_utc, write_out  # noqa: E402

#: one ``struct acct_v3`` record (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid,
#: btime (s since the epoch), etime (float), utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t), comm
ACCT_V3 = struct.Struct("<ccHIIIIIIf8H16s")
#: the unit of an accounting record's utime and stime: AHZ ticks per second
ACCT_HZ = 100
#: the kinds a process is counted under, in the report's order
KINDS = ("training ranks", "launchers", "tool processes", "ddpbench drivers", "reports", "environment builds",
         "Ray", "SLURM", "pytest", "other")
#: a sampled command line -> its kind; the first rule that matches wins (ranks are found by their parent)
COMMAND_RULES: Tuple[Tuple[str, str], ...] = (
    (r"torch\.distributed\.run|/torchrun\b", "launchers"),
    (r"-m ddpbench\.report\b|/ddpbench-report(\s|$)", "reports"),
    (r"-m ddpbench(\s|$)|^\S*/ddpbench(\s|$)", "ddpbench drivers"),
    (r"^\S*/traceml(\s|$)|-m traceml|py-spy", "tool processes"),
    (r"-m pip\b|^\S*/pip3?(\s|$)|^\S*/uv(\s|$)|-m build\b|-m venv\b|setuptools|rustc|cargo", "environment builds"),
    (r"raylet|gcs_server|dashboard|ray::|^\S*/ray(\s|$)|ray-local\.sh", "Ray"),
    (r"slurm|munged|^\S*/(sbatch|srun|squeue|scancel|scontrol)(\s|$)", "SLURM"),
    (r"-m pytest\b|execnet|sys\.stdin\.readline", "pytest"),
)
#: a process never sampled (it lived less than a sample period) -> its kind, by its accounting name
NAME_RULES: Tuple[Tuple[str, str], ...] = (
    (r"^pt_elastic$", "launchers"),
    (r"^(ray|raylet|gcs_server)|^ray::", "Ray"),
    (r"^(slurm|munged|sbatch|srun|squeue|scancel|scontrol)", "SLURM"),
    (r"^(pip|uv|rustc|cc1|ld)$", "environment builds"),
)
#: kinds whose unsampled descendants are their own (a driver's git calls count as the driver's)
INHERITED = {"ddpbench drivers", "reports", "environment builds", "Ray", "SLURM", "tool processes"}


@dataclass(frozen=True)
class Ended:
    """One process that ended during the run, from its accounting record."""
    pid: int
    ppid: int
    # when it started, seconds since the epoch (whole seconds)
    started: int
    # user + system CPU, seconds
    cpu_s: float
    # the kernel's name for it (at most 15 characters, possibly a thread's name)
    name: str


@dataclass
class Sampled:
    """Command lines seen under /proc while the suite ran: (pid, start in s since the epoch) -> command line."""
    commands: Dict[Tuple[int, float], str] = field(default_factory=dict)
    # (seconds since the run started, busy CPUs over the last interval)
    busy: List[Tuple[float, float]] = field(default_factory=list)


def comp_t(value: int) -> int:
    """Decode the kernel's 16-bit ``comp_t`` (3-bit base-8 exponent, 13-bit mantissa)."""
    return (value & 0x1FFF) << (3 * ((value >> 13) & 0x7))


def read_accounting(data: bytes) -> List[Ended]:
    """The processes in a version-3 accounting file's bytes (other versions' records are skipped)."""
    ended = []
    for offset in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        fields = ACCT_V3.unpack_from(data, offset)
        if fields[1] != b"\x03":
            continue
        cpu_s = (comp_t(fields[10]) + comp_t(fields[11])) / ACCT_HZ
        ended.append(Ended(pid=fields[6], ppid=fields[7], started=fields[8], cpu_s=cpu_s,
                           name=fields[18].split(b"\0", 1)[0].decode(errors="replace")))
    return ended


def busy_ticks(stat_text: str) -> int:
    """Busy clock ticks of the aggregate ``cpu`` line of /proc/stat: user + nice + system + irq + softirq (not
    idle, iowait or steal)."""
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in stat_text.split("\n", 1)[0].split()[1:8])
    return user + nice + system + irq + softirq


def _busy_now() -> int:
    return busy_ticks(Path("/proc/stat").read_text())


def kind_of_command(command: str) -> Optional[str]:
    """The kind a command line belongs to by ``COMMAND_RULES``, or None."""
    return next((kind for pattern, kind in COMMAND_RULES if re.search(pattern, command)), None)


def classify(ended: Sequence[Ended], commands: Dict[Tuple[int, float], str],
             slack_s: float = 1.5) -> Dict[str, List[Ended]]:
    """Every ended process under one kind of ``KINDS``.

    A process's command line is the sampled one with its pid and a start within ``slack_s`` of its record's
    (pids are reused). A child of a launcher that is not a launcher itself is a training rank; a process
    never sampled takes its accounting name's kind, else the kind of its nearest classified ancestor where
    that kind owns its helpers (``INHERITED``), else "other".
    """
    by_pid: Dict[int, List[Tuple[float, str]]] = defaultdict(list)
    for (pid, start), command in commands.items():
        by_pid[pid].append((start, command))
    records: Dict[int, List[Ended]] = defaultdict(list)
    for e in ended:
        records[e.pid].append(e)

    def parent_of(e: Ended) -> Optional[Ended]:
        """The process with the parent's pid that started last before ``e`` did (pids are reused)."""
        before = [p for p in records.get(e.ppid, []) if p.started <= e.started and p is not e]
        return max(before, key=lambda p: p.started) if before else None

    def command_of(e: Ended) -> Optional[str]:
        near = [(abs(start - e.started), command) for start, command in by_pid.get(e.pid, [])
                if abs(start - e.started) <= slack_s]
        return min(near)[1] if near else None

    memo: Dict[Ended, Optional[str]] = {}

    def own_kind(e: Ended) -> Optional[str]:
        if e not in memo:
            command = command_of(e)
            kind = kind_of_command(command) if command else None
            if kind is None and command is None:
                kind = next((k for pattern, k in NAME_RULES if re.search(pattern, e.name)), None)
            memo[e] = kind
        return memo[e]

    kinds: Dict[str, List[Ended]] = {kind: [] for kind in KINDS}
    for e in ended:
        kind = own_kind(e)
        parent = parent_of(e)
        if kind != "launchers" and parent is not None and own_kind(parent) == "launchers":
            kind = "training ranks"
        seen: set[Ended] = set()
        while kind is None and parent is not None and parent not in seen:
            seen.add(parent)
            ancestor = own_kind(parent)
            kind = ancestor if ancestor in INHERITED else None
            parent = parent_of(parent)
        kinds[kind or "other"].append(e)
    return kinds


def _sample(sampled: Sampled, stop: threading.Event, period_s: float, busy_every_s: float, t0: float) -> None:
    """Record new processes' command lines every ``period_s`` and the busy CPUs every ``busy_every_s``."""
    boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime"))
    tick = os.sysconf("SC_CLK_TCK")
    known: set[int] = set()
    last_busy, last_at = _busy_now(), time.monotonic()
    n_cpus = os.cpu_count() or 1
    while not stop.wait(period_s):
        pids = {int(p) for p in os.listdir("/proc") if p.isdigit()}
        for pid in pids - known:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            start = boot + int(stat.rsplit(")", 1)[1].split()[19]) / tick
            sampled.commands[(pid, start)] = command.strip()
        known = pids
        if time.monotonic() - last_at >= busy_every_s:
            now_busy, now = _busy_now(), time.monotonic()
            cpus = (now_busy - last_busy) / tick / (now - last_at)
            sampled.busy.append((now - t0, min(cpus, n_cpus)))
            last_busy, last_at = now_busy, now


def _accounting_problem() -> Optional[str]:
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("accton") is None:
        return "accton not found (apt-get install acct)"
    return None


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def report(args: argparse.Namespace, wall_s: float, exit_code: int, last_line: str, busy_s: float,
           sampled: Sampled, kinds: Optional[Dict[str, List[Ended]]], why_no_census: Optional[str],
           load_before: str) -> str:
    """The markdown table of one run."""
    n_cpus = os.cpu_count() or 1
    floor_s = busy_s / n_cpus
    goal_s = args.goal_min * 60
    lines = [f"# Test suite time ({now_utc()})", "", machine_line(), "",
             f"command: `{shlex.join(['python', '-m', 'pytest', *args.pytest_args])}` in {args.cwd} "
             f"(load before {load_before}, after {load()})", "",
             "| figure | value |", "|---|---|",
             f"| pytest | {last_line or 'no summary line'} (exit {exit_code}) |",
             f"| wall | {_minutes(wall_s)} (goal {args.goal_min:g} min: {'met' if wall_s <= goal_s else 'not met'}) |",
             f"| machine CPU, busy | {busy_s:,.0f} s on {n_cpus} CPUs, {busy_s / wall_s:.2f} busy CPUs on average |",
             f"| CPU floor (busy CPU / CPUs) | {_minutes(floor_s)}: the goal needs "
             f"{'no less CPU' if floor_s <= goal_s else f'{busy_s - goal_s * n_cpus:,.0f} CPU s less'} |", ""]
    if kinds is None:
        lines += [f"No per-kind census: {why_no_census}.", ""]
    else:
        counted = sum(e.cpu_s for group in kinds.values() for e in group)
        lines += ["CPU of the processes that ended during the run, by kind (process accounting):", "",
                  "| kind | processes | CPU s | share | median CPU s per process |", "|---|---|---|---|---|"]
        for kind in KINDS:
            group = sorted(e.cpu_s for e in kinds[kind])
            if group:
                lines.append(f"| {kind} | {len(group)} | {sum(group):,.1f} | {100 * sum(group) / counted:.0f} % | "
                             f"{group[len(group) // 2]:.2f} |")
        lines += [f"| all | {sum(len(g) for g in kinds.values())} | {counted:,.1f} | 100 % | |", ""]
    if sampled.busy:
        per_minute: Dict[int, List[float]] = defaultdict(list)
        for at, cpus in sampled.busy:
            per_minute[int(at // 60)].append(cpus)
        means = (sum(v) / len(v) for _, v in sorted(per_minute.items()))
        lines += ["Busy CPUs per minute: " + " ".join(f"{m:.1f}" for m in means), ""]
    return "\n".join(lines)


def main(argv: Optional[Iterable[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goal-min", type=float, default=10.0, help="the suite's goal, minutes of wall (default 10)")
    parser.add_argument("--cwd", type=Path, default=REPO, help="where pytest runs (default: this checkout)")
    parser.add_argument("--sample-s", type=float, default=0.5, help="seconds between /proc scans (default 0.5)")
    parser.add_argument("--no-census", action="store_true", help="skip process accounting even where it works")
    parser.add_argument("--out", type=Path, help="write the table to this file")
    parser.add_argument("pytest_args", nargs="*", help="pytest's arguments after --", default=["-q", "-n", "3"])
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.goal_min <= 0 or args.sample_s <= 0:
        parser.error("--goal-min and --sample-s must be > 0")
    if not Path("/proc/stat").is_file():
        parser.error("needs Linux's /proc")
    why_no_census = "switched off (--no-census)" if args.no_census else _accounting_problem()
    acct_file = None
    if why_no_census is None:
        acct_file = Path(tempfile.mkstemp(prefix="suite-time-", suffix=".acct")[1])
        started = subprocess.run(["accton", str(acct_file)], capture_output=True, text=True)
        if started.returncode != 0:
            why_no_census = f"accton failed: {started.stderr.strip() or started.stdout.strip()}"
    sampled, stop = Sampled(), threading.Event()
    load_before = load()
    t0 = time.monotonic()
    busy0 = _busy_now()
    sampler = threading.Thread(target=_sample, args=(sampled, stop, args.sample_s, 5.0, t0), daemon=True)
    sampler.start()
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", *args.pytest_args], cwd=args.cwd,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    finally:
        if why_no_census is None:
            subprocess.run(["accton", "off"], capture_output=True)
        stop.set()
        sampler.join()
    wall_s = time.monotonic() - t0
    busy_s = (_busy_now() - busy0) / os.sysconf("SC_CLK_TCK")
    tail = [line for line in run.stdout.splitlines() if line.strip()]
    last_line = tail[-1].strip("= ") if tail else ""
    kinds = None
    if acct_file is not None:
        if why_no_census is None:
            kinds = classify(read_accounting(acct_file.read_bytes()), sampled.commands)
        acct_file.unlink(missing_ok=True)
    text = report(args, wall_s, run.returncode, last_line, busy_s, sampled, kinds, why_no_census, load_before)
    print(text)
    write_out(args.out, text, {"wall_s": wall_s, "busy_cpu_s": busy_s, "exit_code": run.returncode,
                               "pytest": last_line, "busy_cpus": sampled.busy,
                               "kinds": {k: [e.__dict__ for e in v] for k, v in (kinds or {}).items()}})
    if run.returncode != 0:
        print("\n".join(tail[-30:]), file=sys.stderr)
    return 0 if run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
