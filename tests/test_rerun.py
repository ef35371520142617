"""repeat=auto with precision.disturbed: which pairs are re-run instead of counted (ddpbench.analysis.rerun),
the stopping decision without them, stopping record v2 (and v1 still read), and the report that agrees.

Synthetic trial records (the decision and the analysis only read records); the real sweep with a real
CPU hog is in tests/test_repeat_auto.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from ddpbench.analysis.paired import analyze
from ddpbench.analysis.rerun import is_rerun, repeat_disturbance, rerun_pairs
from ddpbench.collect.collector import flatten_trial
from ddpbench.config import PrecisionConfig
from ddpbench.formats.stopping_record import read_stopping_record
from ddpbench.report import write_report
from ddpbench.sweep.adaptive import AdaptiveStop, ConditionState
from helpers.trials import make_trial, write_trial

QUIET = {"n_cpus": 2, "own_cpus": None, "load1_start": 2.0, "load1_end": 2.1, "foreign_cpu_s": 0.5,
         "steal_s": 0.0, "cpu_affinity": None}
#: one other process spinning a CPU for a quarter of a 106 s trial: 25 s of 212 CPU s, 12 %
BUSY = {**QUIET, "foreign_cpu_s": 25.0}
COND = {"cluster": "local_cpu", "model": "tiny", "stop": "steps"}
#: the per-step overhead of each repeat's traceml trial, %: repeat 2 is the disturbed one, far off
OVERHEAD = {1: 10.0, 2: 40.0, 3: 11.0, 4: 9.0, 5: 10.5, 6: 9.5}


def trial(sweep: Path, mode: str, repeat: int, job: int, load: dict[str, Any] | None, status: str = "ok") -> dict:
    train = 100.0 * (1 + OVERHEAD[repeat] / 100) if mode == "traceml" else 100.0
    v2 = {"schema_version": 2, "workload": "mlp", "timing": "step", "phase_time_ms": None, "memory": None,
          "attempt": {"number": 1, "dir": f"{sweep}/{job}"}, "metrics": None, "tool": None}
    return make_trial(sweep_dir=str(sweep), mode=mode, repeat=repeat, pair_position=job % 2, job_num=job,
                      condition=COND, train_s=train, status=status, load=load, **v2)


def write_pair(sweep: Path, repeat: int, disturbed: set[int]) -> list[str]:
    """Write pair ``repeat`` (its native trial ran beside a CPU hog when ``repeat`` is in ``disturbed``); its job dirs."""
    pair = [trial(sweep, "native", repeat, 2 * repeat - 2, BUSY if repeat in disturbed else QUIET),
            trial(sweep, "traceml", repeat, 2 * repeat - 1, QUIET)]
    return [str(write_trial(sweep, t).parent) for t in pair]


def run_auto(stop: AdaptiveStop, sweep: Path, repeats: int, disturbed: set[int]) -> list[ConditionState]:
    """Finish pairs 1..``repeats`` one after the other, as the sweep driver does; the state after each."""
    return [stop.after_pair(overrides(r), write_pair(sweep, r, disturbed)) for r in range(1, repeats + 1)]


def stopper(sweep: Path, disturbed: str = "rerun", **precision: Any) -> AdaptiveStop:
    settings = {"min_pairs": 3, "max_pairs": 6, "halfwidth_pct": None, **precision, "disturbed": disturbed}
    return AdaptiveStop(sweep, OmegaConf.merge(OmegaConf.structured(PrecisionConfig), settings), "native", 2.0)


def overrides(repeat: int) -> list[str]:
    return ["mode=traceml", f"repeat={repeat}", "model=tiny"]


def rows(*loads: dict[str, Any] | None, status: str = "ok") -> list[dict[str, Any]]:
    return [flatten_trial(trial(Path("/s"), mode, 1, i, load, status if i else "ok"))
            for i, (mode, load) in enumerate(zip(("traceml", "native"), loads))]


def test_a_pair_is_disturbed_when_either_trial_is_and_a_failed_pair_is_not() -> None:
    assert repeat_disturbance(rows(QUIET, QUIET), "native") is None
    why = repeat_disturbance(rows(QUIET, BUSY), "native")
    assert why == "native trial: other processes used 25.0 CPU s (12 % of 2 CPUs)"
    both = repeat_disturbance(rows(BUSY, BUSY), "native")
    assert both is not None and both.startswith("native trial: ") and "; traceml trial: " in both
    assert repeat_disturbance(rows(None, QUIET), "native") is None  # no load recorded: cannot be judged
    assert repeat_disturbance(rows(QUIET, BUSY, status="failed"), "native") is None


def test_rerun_leaves_the_disturbed_pair_out_and_the_next_repeat_counts(tmp_path: Path) -> None:
    stop = stopper(tmp_path)
    states = run_auto(stop, tmp_path, 3, disturbed={2})
    assert [s.reason for s in states[:2]] == [None, None]
    state = states[2]
    assert state.pairs == 3 and state.counted == [1, 3]
    assert [e["repeat"] for e in state.excluded] == [2] and "native trial: other processes" in state.excluded[0]["why"]
    assert state.reason is None and state.comparisons["traceml"]["n"] == 2  # two counted: below min_pairs
    state = stop.after_pair(overrides(4), write_pair(tmp_path, 4, set()))
    assert state.counted == [1, 3, 4] and state.reason == "over", state.comparisons
    assert state.comparisons["traceml"]["mean"] == pytest.approx(10.0)  # 10, 11, 9: the 40 % pair is not in it
    record, problem = read_stopping_record(tmp_path)
    assert problem is None and record is not None and record["schema_version"] == 2
    assert record["rule"]["disturbed"] == "rerun"
    [condition] = record["conditions"]
    assert condition["condition_id"] == "cluster=local_cpu,model=tiny,stop=steps"
    assert condition["excluded"] == state.excluded and condition["counted"] == [1, 3, 4] and condition["pairs"] == 4


def test_count_counts_the_disturbed_pair(tmp_path: Path) -> None:
    state = run_auto(stopper(tmp_path, disturbed="count"), tmp_path, 3, disturbed={2})[-1]
    assert state.excluded == [] and state.counted == [1, 2, 3]
    assert state.comparisons["traceml"]["n"] == 3 and state.comparisons["traceml"]["mean"] == pytest.approx(61 / 3)


def test_disturbed_pairs_still_use_up_max_pairs(tmp_path: Path) -> None:
    state = run_auto(stopper(tmp_path, max_pairs=3), tmp_path, 3, disturbed={1, 2, 3})[-1]
    assert state.counted == [] and len(state.excluded) == 3 and state.reason == "max_pairs"


def test_a_bad_disturbed_setting_is_refused_by_the_schema() -> None:
    with pytest.raises(ValidationError, match=r"Invalid value 'ignore', expected one of \[rerun, count\]"):
        OmegaConf.merge(OmegaConf.structured(PrecisionConfig), {"disturbed": "ignore"})
    assert OmegaConf.structured(PrecisionConfig).disturbed == "rerun"


def test_the_report_leaves_out_and_names_the_pairs_stopping_json_excluded(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    run_auto(stopper(sweep), sweep, 4, disturbed={2})
    moved = tmp_path / "moved"  # the trials recorded the old sweep dir: the report still finds their pairs
    sweep.rename(moved)
    outcome = write_report([moved], tmp_path / "out")
    (c,) = [c for c in outcome.analysis.comparisons if c.mode == "traceml"]
    assert c.n_pairs == 3 and [(e.repeat, e.cause) for e in c.excluded] == [(2, "rerun")]
    assert [e.repeat for e in c.excluded if is_rerun(e)] == [2]
    assert c.metrics["step_overhead_pct"].mean == pytest.approx(10.0)
    report = outcome.report_path.read_text()
    line = "pair 2 disturbed (native trial: other processes used 25.0 CPU s (12 % of 2 CPUs)): re-run, not counted"
    stopping_part = report.split("## Why the sweep stopped", 1)[1].split("\n## ", 1)[0]
    details_part = report.split("### traceml vs native", 1)[1]
    assert line in stopping_part and f"- Not counted: {line}." in details_part
    assert "| 4 (3) | over |" in stopping_part
    assert "(disturbed, re-run and not counted: pair 2)" in report
    assert "1 disturbed trial(s) belong to pairs that repeat=auto re-ran: they are not in the statistics." in report
    assert "trial(s) ran while other work took part of the machine" not in report
    payload = json.loads(outcome.analysis_path.read_text())
    [excluded] = payload["comparisons"][0]["excluded"]
    assert excluded["repeat"] == 2 and excluded["cause"] == "rerun"
    assert excluded["reason"] == "native trial: other processes used 25.0 CPU s (12 % of 2 CPUs)"  # the why, not the text


def test_without_stopping_json_or_with_count_the_analysis_is_unchanged(tmp_path: Path) -> None:
    for r in range(1, 5):
        write_pair(tmp_path / "plain", r, disturbed={2})
    (c,) = write_report([tmp_path / "plain"], tmp_path / "out").analysis.comparisons
    assert c.n_pairs == 4 and c.excluded == ()
    frame = pd.DataFrame([flatten_trial(trial(Path("/s"), m, r, 0, BUSY)) for r in (1, 2) for m in ("native", "traceml")])
    assert analyze(frame, rerun={}).comparisons[0].n_pairs == 2
    assert rerun_pairs({"conditions": [{"condition_id": "c", "excluded": []}]}, ["/s"]) == {}


def test_stopping_record_v1_still_reads(tmp_path: Path) -> None:
    v1 = {"schema": "ddpbench.stopping", "schema_version": 1, "rule": {"metric": "step_overhead_pct"},
          "conditions": [{"condition": ["model=tiny"], "pairs": 3, "reason": "over", "comparisons": {}}]}
    (tmp_path / "stopping.json").write_text(json.dumps(v1))
    record, problem = read_stopping_record(tmp_path)
    assert problem is None and record is not None
    assert record["rule"]["disturbed"] == "count"
    [condition] = record["conditions"]
    assert condition["excluded"] == [] and condition["counted"] is None and condition["condition_id"] is None
    assert rerun_pairs(record, ["/s"]) == {}
    (tmp_path / "stopping.json").write_text(json.dumps({**v1, "schema_version": 3}))
    assert "stopping.json (ddpbench.stopping): unknown schema_version 3 of ddpbench.stopping" in read_stopping_record(tmp_path)[1]
