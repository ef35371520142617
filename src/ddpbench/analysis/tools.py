"""Several tools side by side: their ranking by per-step cost, and what each trial's tool left."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence, cast

from ddpbench.analysis.figures import finite
from ddpbench.analysis.pairing import str_or_none
from ddpbench.analysis.results import Comparison, ToolArtifact
from ddpbench.choices import Role


def tool_ranking(comparisons: Sequence[Comparison]) -> tuple[Comparison, ...]:
    """Tool comparisons sorted by mean per-step overhead (ms), unknown last."""
    tools = [c for c in comparisons if c.role == Role.tool]

    def key(c: Comparison) -> tuple[bool, float, str]:
        s = c.metrics.get("step_overhead_ms")
        value = s.mean if s is not None and s.n else math.nan
        return (not math.isfinite(value), value if math.isfinite(value) else 0.0, c.label)

    return tuple(sorted(tools, key=key))


def compares_several_tools(comparisons: Sequence[Comparison]) -> bool:
    """True when more than one tool mode (besides the baseline) was compared."""
    return len({c.mode for c in comparisons if c.role == Role.tool}) > 1


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    v = finite(value)
    return bool(v) if v is not None else None


def tool_artifacts(records: Sequence[Mapping[str, Any]]) -> tuple[ToolArtifact, ...]:
    """Every trial with a ``tool`` section: its tool's name, whether its output is usable, and its size."""
    out = []
    for r in records:
        if all(str_or_none(r.get(k)) is None for k in ("tool_name", "tool_usable", "tool_bytes")):
            continue
        size = finite(r.get("tool_bytes"))
        problem = r.get("tool_problem")
        name = r.get("tool_name")
        out.append(ToolArtifact(
            condition_id=str(r.get("condition_id")), mode=str(r.get("mode")), repeat=int(cast(Any, r.get("repeat"))),
            name=str(name) if isinstance(name, str) else None, usable=_bool(r.get("tool_usable")),
            bytes=int(size) if size is not None else None,
            problem=str(problem) if isinstance(problem, str) and problem else None,
        ))
    return tuple(sorted(out, key=lambda a: (a.condition_id, a.mode, a.repeat)))
