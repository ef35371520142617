"""Figures read from rank 0's standard output through ``workload.metrics`` (docs/workload.md): the last match of
each pattern in node 0's agent stdout, as a number; one that matches nothing fails an otherwise ok trial."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from ddpbench.config import DdpbenchConfig


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
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def apply_metrics(cfg: DdpbenchConfig, nodes: Mapping[int, Mapping[str, Any]], status: str,
                  error: Optional[str]) -> Tuple[Optional[Dict[str, Any]], str, Optional[str]]:
    """The trial record's ``metrics`` from node 0's stdout log (None when the config asks for no figure), and the
    trial's status and error: an ok trial where a pattern found no number becomes failed."""
    patterns = {str(name): str(pattern) for name, pattern in cfg.workload.metrics.items()}
    if not patterns:
        return None, status, error
    stdout = (nodes.get(0) or {}).get("stdout")
    path = Path(stdout) if stdout else None
    if path is not None and path.is_file():
        with open(path, encoding="utf-8", errors="replace") as handle:
            found = last_matches(handle, patterns)
    else:
        found = {name: None for name in patterns}
    units = cfg.workload.units
    metrics = {name: {"value": _number(found[name]), "unit": units.get(name), "source": pattern}
               for name, pattern in patterns.items()}
    where = f"rank 0's output ({path})"
    problems = [f"workload.metrics.{name}: pattern {pattern!r} matched nothing in {where}" if found[name] is None
                else f"workload.metrics.{name}: pattern {pattern!r} captured {found[name]!r}, not a number, in {where}"
                for name, pattern in patterns.items() if metrics[name]["value"] is None]
    if problems and status == "ok":
        return metrics, "failed", problems[0]
    return metrics, status, error
