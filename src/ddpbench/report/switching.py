"""The report's within-trial switching section: the within-trial per-step cost beside the between-trial one.

Laid out from :class:`ddpbench.analysis.switching.SwitchedEstimate` (pure figures); nothing computed here.
"""

from __future__ import annotations

import math
from typing import Sequence

from ddpbench.analysis.caveats import fmt
from ddpbench.analysis.paired import Comparison
from ddpbench.analysis.switching import SwitchedEstimate

WHICH_ANSWERS_WHAT = (
    "Two per-step figures answer two questions. **Within-trial** (`switching=blocks`: blocks of steps with the "
    "tool's switchable per-step work off and on inside the same processes, ABBA order): what the instrumentation "
    "the switch turns off costs per step, free of the process-to-process variance. **Between-trial** (paired "
    "trials): what the tool costs in all, including what its switch leaves on (threads, aggregator, start-up). "
    "The baseline's switch is a no-op: its within-trial interval is the method's own noise floor."
)


def _interval(sw: SwitchedEstimate) -> str:
    if not math.isfinite(sw.ci_low_ms):
        return f"{fmt(sw.overhead_ms, 3, True)} ms (no interval: one quad)"
    return (f"{fmt(sw.overhead_ms, 3, True)} ms [{fmt(sw.ci_low_ms, 3, True)}, {fmt(sw.ci_high_ms, 3, True)}] "
            f"({fmt(sw.overhead_pct, 2, True)} % [{fmt(sw.ci_low_pct, 2, True)}, {fmt(sw.ci_high_pct, 2, True)}])")


def _between(sw: SwitchedEstimate) -> str:
    if not math.isfinite(sw.between_ms):
        return "unknown"
    if not math.isfinite(sw.between_low_ms):
        return f"{fmt(sw.between_ms, 3, True)} ms (one pair: no interval)"
    return f"{fmt(sw.between_ms, 3, True)} ms [{fmt(sw.between_low_ms, 3, True)}, {fmt(sw.between_high_ms, 3, True)}]"


def switching_lines(comparisons: Sequence[Comparison]) -> list[str]:
    """The headline lines (one per comparison that switched) and the note on which figure answers what."""
    switched = [c for c in comparisons if c.switched is not None]
    if not switched:
        return []
    lines = [WHICH_ANSWERS_WHAT, ""]
    for c in switched:
        sw = c.switched
        assert sw is not None
        floor = c.switched_base
        floor_text = (f"; no-op switch ({c.baseline}, noise floor): {_interval(floor)}" if floor is not None else "")
        lines.append(
            f"- {c.label}: within-trial (switch `{sw.what}`, {sw.n_trials} trial(s), {sw.quads} quads, {sw.method}): "
            f"per-step {_interval(sw)}; between-trial, the same trials' on-blocks against the baseline's "
            f"({sw.between_pairs} pairs): {_between(sw)}{floor_text}. Stays on while switched off: {sw.stays_on or '—'}."
        )
    return lines + [""]
