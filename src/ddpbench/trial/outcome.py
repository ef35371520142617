"""How a trial ended: its rank records read back, its status (ok, failed, timeout) with one line saying why, its exit
code and its wall time, from the node entries and the rank records alone; and the figures ``workload.metrics`` reads
from rank 0's output (docs/workload.md: the last match of each pattern, as a number, or the trial fails)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ddpbench.choices import TrialStatus
from ddpbench.config import DdpbenchConfig
from ddpbench.formats.rank_combine import rank_consistency_error
from ddpbench.formats.rank_record import RANK_RECORD_GLOB, read_rank_record
from ddpbench.trial.process import tail

#: a Python exception line (optionally behind torchrun's ``[rankN]: `` prefix), not torchrun's own summary
_EXCEPTION_LINE = re.compile(r"^(\[rank\d+\]: )?(?!\S*ChildFailedError)[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b:? ?.*$")


def read_rank_records(metrics_dir: Path) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The valid rank records in ``metrics_dir`` (any known version), and one line per file that is not valid."""
    records, problems = [], []
    for path in sorted(metrics_dir.glob(RANK_RECORD_GLOB)):
        data, issues = read_rank_record(path)
        if data is None:
            problems.append(f"{path.name}: {issues[0]}" + (f" (+{len(issues) - 1} more)" if len(issues) > 1 else ""))
        else:
            records.append(data)
    return records, problems


def _first_error_line(text: str) -> str:
    exceptions = [line.strip() for line in text.splitlines() if _EXCEPTION_LINE.match(line.strip())]
    if exceptions:
        return exceptions[-1][:300]
    for line in reversed(text.splitlines()):
        stripped = line.strip()
        if stripped and ("Error" in stripped or "error" in stripped or "Exception" in stripped):
            return stripped[:300]
    return ""


def classify(
    wait_reason: str,
    timeout_s: float,
    nodes: Mapping[int, Mapping[str, Any]],
    ranks: Sequence[Mapping[str, Any]],
    cfg: DdpbenchConfig,
    rank_problems: Sequence[str] = (),
) -> Tuple[TrialStatus, Optional[str]]:
    """The trial's status (ok/failed/timeout) and, unless ok, one line saying why; ``rank_problems``: one line per
    rank record that failed validation (not in ``ranks``)."""
    if wait_reason == "timeout":
        return TrialStatus.timeout, f"trial ran past its timeout of {timeout_s:.0f} s and was killed"
    missing = [r for r in range(cfg.cluster.nnodes) if r not in nodes]
    bad = next((n for n in nodes.values() if n.get("exit_code") != 0), None)
    if missing and (bad is None or bad.get("exit_code") is None):  # a node that failed outright says more
        return TrialStatus.failed, f"node(s) {missing} left no node record"
    if bad is not None:
        detail = bad.get("error") or _first_error_line(tail(bad.get("stderr") or "", 60))
        return TrialStatus.failed, f"node {bad['node_rank']} exited with {bad.get('exit_code')}" + (f": {detail}" if detail else "")
    if rank_problems:
        return TrialStatus.failed, f"invalid rank record {rank_problems[0]}"
    script = cfg.decided.script
    if script.is_user_script and not (script.records and (ranks or script.records_required)):
        return TrialStatus.ok, None  # no recorder, or a framework it could not attach to (said on stderr): wall-time figures
    error = rank_consistency_error(ranks, cfg.cluster.nnodes * cfg.cluster.nproc_per_node)
    return (TrialStatus.failed, error) if error else (TrialStatus.ok, None)


def first_failing_exit_code(nodes: Mapping[int, Mapping[str, Any]]) -> Optional[int]:
    """The first non-zero node exit code, 0 when every node exited 0, None when one was killed."""
    codes = [nodes[k].get("exit_code") for k in sorted(nodes)]
    failing = [c for c in codes if c not in (0, None)]
    if failing:
        return int(failing[0])
    return 0 if all(c == 0 for c in codes) else None


def slowest_node_wall(nodes: Mapping[int, Mapping[str, Any]]) -> Tuple[float, float]:
    """The trial's wall (the slowest node's spawn-to-exit, s) and that node's spawn epoch (nodes with a wall only)."""
    timed = [n for n in nodes.values() if n.get("wall_s") is not None]
    slowest = max(timed, key=lambda n: float(n["wall_s"]))
    return float(slowest["wall_s"]), float(slowest["spawn_epoch"])


def last_matches(lines: Any, patterns: Mapping[str, str]) -> Dict[str, Optional[str]]:
    """For each name, the capture group of the last line ``patterns[name]`` matches in ``lines`` (None: no match)."""
    compiled = {name: re.compile(pattern) for name, pattern in patterns.items()}
    found: Dict[str, Optional[str]] = {name: None for name in patterns}
    for line in lines:
        for name, regex in compiled.items():
            match = regex.search(line)
            if match is not None:
                found[name] = match.group(1)
    return found


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def apply_metrics(cfg: DdpbenchConfig, nodes: Mapping[int, Mapping[str, Any]], status: TrialStatus,
                  error: Optional[str]) -> Tuple[Optional[Dict[str, Any]], TrialStatus, Optional[str]]:
    """The trial record's ``metrics`` from node 0's stdout log (None when the config asks for no figure), and the
    trial's status and error: an ok trial where a pattern found no number becomes failed."""
    patterns = {str(name): str(pattern) for name, pattern in cfg.workload.metrics.items()}
    if not patterns:
        return None, status, error
    stdout = (nodes.get(0) or {}).get("stdout")
    path = Path(stdout) if stdout else None
    found: Dict[str, Optional[str]] = {name: None for name in patterns}
    if path is not None and path.is_file():
        with open(path, encoding="utf-8", errors="replace") as handle:
            found = last_matches(handle, patterns)
    units = cfg.workload.units
    metrics = {name: {"value": _number(found[name]), "unit": units.get(name), "source": pattern}
               for name, pattern in patterns.items()}
    where = f"rank 0's output ({path})"
    for name, pattern in patterns.items():
        what = "matched nothing" if found[name] is None else f"captured {found[name]!r}, not a number,"
        if metrics[name]["value"] is None and status == TrialStatus.ok:
            return metrics, TrialStatus.failed, f"workload.metrics.{name}: pattern {pattern!r} {what} in {where}"
    return metrics, status, error
