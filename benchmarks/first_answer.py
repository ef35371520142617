"""The README's main command, as a new user runs it: how long it takes and whether its first answer decides.

Each run clones the repository's committed HEAD into a new temporary folder, makes a fresh virtual
environment there (``--system-site-packages``: torch and the other wheels of this machine are reused, as a
machine that has them; ddpbench itself is installed from the clone by the README's own ``scripts/setup.sh``),
and runs the README's main command line (read from README.md: the ``bash scripts/setup.sh && ...`` line without
``--test``) with that environment's ``python3`` first on ``PATH``. It records the command's wall time and, from
the sweep's ``analysis.json``, every tool comparison's verdict, the figure that decided it and the per-step
interval. A fresh clone, as the goal is stated, for every run: nothing a run leaves behind helps the next.

Goal: a conclusive verdict (``over`` or ``within``) in at most ``--limit-min`` minutes (5) in at least 4 of 5 runs.
Usage::

    python benchmarks/first_answer.py [--runs 5] [--limit-min 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, load, machine_line, now_utc, write_out  # noqa: E402

#: hides this machine's other editable installs of ddpbench from the run's environment (Hydra's plugin scan would
#: otherwise walk them too); the clone's own install stays
HIDE_OTHER_INSTALLS = """import sys
sys.path[:] = [p for p in sys.path if "__editable__.ddpbench" not in p or p.startswith({clone!r})]
"""


def main_command(readme: Path) -> str:
    """The README's main command line: ``bash scripts/setup.sh && ...`` without ``--test``."""
    for line in readme.read_text().splitlines():
        line = line.strip()
        if line.startswith("bash scripts/setup.sh &&") and "--test" not in line:
            return line
    raise SystemExit(f"first_answer: error: no 'bash scripts/setup.sh && ...' main command in {readme}")


def verdicts(sweep_dir: Path) -> list[dict[str, Any]]:
    """Each tool comparison's label, verdict, deciding figures and per-step interval (ms) from analysis.json."""
    data = json.loads((sweep_dir / "analysis.json").read_text())
    out = []
    for c in data["comparisons"]:
        if c["role"] != "tool":
            continue
        step = c["metrics"].get("step_overhead_ms") or {}
        out.append({"label": c["label"], "status": c["verdict"]["status"], "decided_by": c["verdict"]["decided_by"],
                    "step_ms": [step.get("mean"), step.get("ci_low"), step.get("ci_high")],
                    "step_pct": c["metrics"].get("step_overhead_pct", {}).get("mean"),
                    "lower_bound_pct": c["verdict"].get("lower_bound_pct")})
    return out


def one_run(index: int, command: str, keep: bool) -> dict[str, Any]:
    """Clone, make the environment, run the command; the run's figures."""
    root = Path(tempfile.mkdtemp(prefix=f"ddpbench-first-{index}-"))
    clone = root / "ddpbench"
    try:
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
        venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "sitecustomize.py").write_text(HIDE_OTHER_INSTALLS.format(clone=str(clone)))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("TRACEML_", "HYDRA_"))},
               "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
        started, load_before = time.monotonic(), load()
        proc = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=3600)
        wall = time.monotonic() - started
        sweeps = sorted((clone / "outputs" / "multirun").glob("*/analysis.json"))
        found = verdicts(sweeps[-1].parent) if sweeps else []
        return {"run": index, "exit_code": proc.returncode, "wall_s": wall, "load_before": load_before,
                "load_after": load(), "verdicts": found, "stderr_tail": proc.stderr[-1500:] if proc.returncode else ""}
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def _cell(v: dict[str, Any]) -> str:
    mean, low, high = v["step_ms"]
    interval = f"{mean:+.3f} ms [{low:+.3f}, {high:+.3f}]" if None not in (mean, low, high) else "no interval"
    bound = v.get("lower_bound_pct")
    lower = (f"; within-trial lower bound {bound[0]:+.2f} % [{bound[1]:+.2f}, {bound[2]:+.2f}]"
             if bound and None not in bound else "")
    return f"{v['status']} ({', '.join(v['decided_by']) or '—'}); per-step {interval}{lower}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--limit-min", type=float, default=5.0, help="the time a conclusive first answer may take")
    p.add_argument("--command", help="the command line to run (default: the README's main command)")
    p.add_argument("--keep", action="store_true", help="keep each run's folder (clone, environment, sweep)")
    p.add_argument("--out", type=Path, help="also write the table (markdown; JSON when it ends in .json)")
    args = p.parse_args(argv)
    command = args.command or main_command(REPO / "README.md")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [f"first_answer  {now_utc()}", machine_line(), f"commit {commit}; command: {command}", "",
             "| run | minutes | load before/after | exit | verdict (decided by); per-step interval |", "|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    runs = []
    for index in range(1, args.runs + 1):
        run = one_run(index, command, args.keep)
        runs.append(run)
        cells = "; ".join(_cell(v) for v in run["verdicts"]) or "no report"
        row = (f"| {index} | {run['wall_s'] / 60:.2f} | {run['load_before']} / {run['load_after']} | "
               f"{run['exit_code']} | {cells} |")
        lines.append(row)
        print(row, flush=True)
        if run["stderr_tail"]:
            print(re.sub(r"^", "    ", run["stderr_tail"], flags=re.M), file=sys.stderr)
    decided = sum(1 for r in runs if r["verdicts"] and all(v["status"] != "inconclusive" for v in r["verdicts"])
                  and r["wall_s"] <= 60 * args.limit_min)
    summary = f"conclusive within {args.limit_min:g} min: {decided} of {len(runs)} runs (goal: 4 of 5)"
    lines += ["", summary]
    print("\n" + summary)
    write_out(args.out, "\n".join(lines) + "\n", {"command": command, "commit": commit, "runs": runs})
    return 0 if decided * 5 >= 4 * len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
