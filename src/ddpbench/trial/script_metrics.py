"""Figures read from rank 0's standard output through ``workload.metrics``.

Each ``workload.metrics.<name>`` is a regular expression with exactly one capture group (checked
with the config, before anything runs); it is searched in every line of node 0's agent standard
output (where rank 0 prints; the other local ranks' lines are there too), and the last match wins.
Its group must read as a number. The figures go into the trial record's ``metrics`` section as
``name -> {value, unit, source}`` (``source``: the pattern). A pattern that matches nothing fails
an otherwise ok trial with one line naming it.
"""

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


def read_metrics(cfg: DdpbenchConfig, stdout_path: Optional[str]) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """The trial record's ``metrics`` from rank 0's stdout log, and why it is unusable (None when every pattern matched a number).

    ``(None, None)`` when the config asks for no figure.
    """
    patterns = {str(name): str(pattern) for name, pattern in cfg.workload.metrics.items()}
    if not patterns:
        return None, None
    path = Path(stdout_path) if stdout_path else None
    if path is not None and path.is_file():
        with open(path, encoding="utf-8", errors="replace") as handle:
            found = last_matches(handle, patterns)
    else:
        found = {name: None for name in patterns}
    units = cfg.workload.units
    metrics = {name: {"value": _number(found[name]), "unit": units.get(name), "source": pattern}
               for name, pattern in patterns.items()}
    where = f"rank 0's output ({path})"
    for name, pattern in patterns.items():
        if found[name] is None:
            return metrics, f"workload.metrics.{name}: pattern {pattern!r} matched nothing in {where}"
        if metrics[name]["value"] is None:
            return metrics, f"workload.metrics.{name}: pattern {pattern!r} captured {found[name]!r}, not a number, in {where}"
    return metrics, None


def apply_metrics(
    cfg: DdpbenchConfig, nodes: Mapping[int, Mapping[str, Any]], status: str, error: Optional[str]
) -> Tuple[Optional[Dict[str, Any]], str, Optional[str]]:
    """Read the figures from node 0's stdout; an ok trial whose pattern found no number becomes failed.

    Returns ``(metrics, status, error)``.
    """
    node0 = nodes.get(0) or {}
    metrics, problem = read_metrics(cfg, node0.get("stdout"))
    if problem is not None and status == "ok":
        return metrics, "failed", problem
    return metrics, status, error
