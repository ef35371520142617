"""Plot file names stay short whatever the condition; coverage skips trials whose steps are unknown."""

import pandas as pd

from ddpbench.analysis.coverage import tool_step_coverage
from ddpbench.report.plots import SLUG_MAX, slug


def test_long_condition_gives_a_short_distinct_file_name() -> None:
    long_a = "workload.metrics.steps_per_s=" + "x" * 400 + "a"
    long_b = "workload.metrics.steps_per_s=" + "x" * 400 + "b"
    assert len(slug(long_a)) <= SLUG_MAX and len(slug(long_b)) <= SLUG_MAX
    assert slug(long_a) != slug(long_b)
    assert slug("cluster=local_cpu,model=tiny") == "cluster_local_cpu_model_tiny"


def test_coverage_skips_a_foreign_script_without_step_counts() -> None:
    frame = pd.DataFrame([
        {"traceml_steps_analyzed": 0, "steps": None, "warmup_steps": None, "status": "ok", "mode": "traceml",
         "repeat": 1, "condition_id": "c"},
        {"traceml_steps_analyzed": 7, "steps": 10, "warmup_steps": 2, "status": "ok", "mode": "traceml",
         "repeat": 2, "condition_id": "c"},
    ])
    gaps = tool_step_coverage(frame)
    assert [(g.repeat, g.steps_analyzed, g.steps_run) for g in gaps] == [(2, 7, 12)]
