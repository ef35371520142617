"""Did the tool see every step? A pure check on the collected table.

TraceML counts a step only inside ``trace_step``: a workload that misses it leaves the tool measuring nothing, so
an ok trial's tool should analyse warmup + timed steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

import pandas as pd

from ddpbench.choices import TrialStatus


@dataclass(frozen=True)
class CoverageGap:
    """One ok trial whose tool analysed a different number of steps than the workload ran."""

    condition_id: str
    mode: str
    repeat: int
    steps_analyzed: int
    steps_run: int


def tool_step_coverage(frame: pd.DataFrame) -> List[CoverageGap]:
    """Ok trials with a TraceML summary whose ``steps_analyzed`` differs from warmup + timed steps."""
    needed = {"traceml_steps_analyzed", "steps", "warmup_steps", "status", "mode", "repeat", "condition_id"}
    if not needed <= set(frame.columns):
        return []
    rows = frame[(frame["status"] == TrialStatus.ok) & frame["traceml_steps_analyzed"].notna()
                 & frame["steps"].notna() & frame["warmup_steps"].notna()]  # a foreign script's steps are unknown
    gaps = [CoverageGap(str(row.condition_id), str(row.mode), int(row.repeat), int(row.traceml_steps_analyzed),
                        int(row.steps) + int(row.warmup_steps)) for row in rows.itertuples(index=False)]
    return [gap for gap in gaps if gap.steps_analyzed != gap.steps_run]
