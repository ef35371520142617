"""``ddpbench-collect PATH... [--out DIR]``: trial.json files into results.csv (+ .parquet); skipped files on stderr.

Exit codes: 0 at least one trial collected; 2 bad input (no such path, no usable trial.json, unwritable output dir).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from ddpbench.collect.collector import collect_trials, write_results
from ddpbench.errors import error_line

PROG = "ddpbench-collect"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Collect ddpbench trial.json files into one table.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="sweep dirs or trial.json files")
    parser.add_argument("--out", type=Path, default=None, help="output dir (default: the first PATH)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    args = _parser().parse_args(argv)
    missing = [p for p in args.paths if not os.path.exists(p)]
    if missing:
        return error_line(f"no such path: {missing[0]}", prog=PROG)
    result = collect_trials(args.paths)
    for path, reason in result.skipped:
        print(f"{PROG}: skipped {path}: {reason}", file=sys.stderr)
    if result.frame.empty:
        return error_line(f"no usable trial.json found under {', '.join(args.paths)}", prog=PROG)
    first = Path(args.paths[0])
    out = args.out if args.out is not None else (first if first.is_dir() else first.parent)
    try:
        written = write_results(result.frame, out)
    except OSError as exc:
        return error_line(f"cannot write to {out}: {exc.strerror or exc}", prog=PROG)
    print(f"{len(result.frame)} trials collected, {len(result.skipped)} skipped -> " + ", ".join(map(str, written)))
    return 0
