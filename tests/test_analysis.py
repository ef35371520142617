"""Known-answer tests of the paired analysis on synthetic trials (no files)."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
import pytest

from ddpbench.formats.analysis_record import SCHEMA_VERSION
from ddpbench.analysis.paired import analysis_to_dict, analyze, pair_table, verdict_for
from ddpbench.analysis.stats import paired_summary
from ddpbench.collect.collector import flatten_trial
from ddpbench.formats.trial_record import FORMAT
from helpers.trials import make_trial

T4 = 2.7764451
D = [1.0, 2.0, 3.0, 4.0, 5.0]  # throughput overhead % per repeat


def frame_of(trials: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([flatten_trial(FORMAT.upgrade(t), f"/x/{i}/trial.json") for i, t in enumerate(trials)])


def sweep(mode: str = "traceml", d: list[float] = D, sweep_dir: str = "/s", **mode_kw: Any) -> list[dict[str, Any]]:
    """Native: 1000 steps in 100 s (10 steps/s, 100 ms), 5 s startup, 1 s teardown.
    Mode: train_s = 100·(1 + d/100), so throughput overhead = d % and per-step overhead = d ms."""
    trials = []
    for r, dr in enumerate(d, start=1):
        first = r % 2
        trials.append(make_trial(sweep_dir=sweep_dir, mode="native", repeat=r, pair_position=1 - first))
        trials.append(
            make_trial(sweep_dir=sweep_dir, mode=mode, repeat=r, pair_position=first,
                       train_s=100.0 * (1 + dr / 100), **mode_kw)
        )
    return trials


def only(analysis, mode: str = "traceml"):
    (c,) = [c for c in analysis.comparisons if c.mode == mode]
    return c


def test_exact_per_pair_overheads_and_t_interval() -> None:
    c = only(analyze(frame_of(sweep())))
    assert c.n_pairs == 5 and c.n_excluded == 0
    thr = [p.throughput_overhead_pct for p in c.pairs]
    assert thr == pytest.approx(D, abs=1e-9)
    assert [p.step_overhead_ms for p in c.pairs] == pytest.approx(D, abs=1e-9)
    assert [p.step_overhead_pct for p in c.pairs] == pytest.approx(D, abs=1e-9)
    assert [p.wall_overhead_pct for p in c.pairs] == pytest.approx([100 * d / 106 for d in D], abs=1e-9)
    assert [p.startup_diff_s for p in c.pairs] == pytest.approx([0.0] * 5)
    s = c.metrics["throughput_overhead_pct"]
    half = T4 * math.sqrt(2.5) / math.sqrt(5)
    assert s.mean == pytest.approx(3.0)
    assert s.ci_low == pytest.approx(3.0 - half, abs=1e-6)
    assert s.ci_high == pytest.approx(3.0 + half, abs=1e-6)
    assert s.ci_low == pytest.approx(1.0367568, abs=1e-6)
    assert (s.median, s.min, s.max) == pytest.approx((3.0, 1.0, 5.0))
    assert c.sides["base_wall_s"].mean == pytest.approx(106.0)
    assert c.sides["mode_wall_s"].mean == pytest.approx(109.0)


@pytest.mark.parametrize(
    "budget,expected",
    [(2.0, "inconclusive"), (6.0, "within"), (0.5, "over")],
)
def test_verdicts_against_budget(budget: float, expected: str) -> None:
    c = only(analyze(frame_of(sweep()), budget_pct=budget))
    assert c.verdict.status == expected
    assert c.verdict.budget_pct == budget


def test_verdict_rules_per_metric() -> None:
    within = paired_summary([0.5, 0.6, 0.7])
    over = paired_summary([3.0, 3.1, 3.2])
    v = verdict_for({"step_overhead_pct": within, "projected_overhead_pct": over}, 2.0)
    assert v.status == "over" and v.per_metric == {"step_overhead_pct": "within", "projected_overhead_pct": "over"}
    v1 = verdict_for({"step_overhead_pct": within, "projected_overhead_pct": paired_summary([0.1])}, 2.0)
    assert v1.status == "inconclusive"


def test_excluded_pairs_counted_with_reasons() -> None:
    trials = sweep()
    trials[3] = make_trial(sweep_dir="/s", mode="traceml", repeat=2, status="failed", pair_position=0)
    del trials[4]  # native of repeat 3
    c = only(analyze(frame_of(trials)))
    assert c.n_pairs == 3 and c.n_excluded == 2
    reasons = {e.repeat: e.reason for e in c.excluded}
    assert reasons[2].startswith("traceml trial failed")
    assert reasons[3] == "no native trial"
    assert {e.cause for e in c.excluded} == {"unpaired"}
    a = analyze(frame_of(trials))
    assert [(f.mode, f.repeat, f.status) for f in a.failed_trials] == [("traceml", 2, "failed")]


def test_modes_pair_only_within_their_sweeps() -> None:
    aa = [make_trial(sweep_dir="/aa", mode=m, repeat=r) for r in (1, 2) for m in ("native", "native_aa")]
    a = analyze(frame_of(sweep() + aa))
    assert only(a).n_excluded == 0
    assert only(a, "native_aa").n_pairs == 2


def test_pairs_across_sweep_dirs_pool_in_one_comparison() -> None:
    c = only(analyze(frame_of(sweep(sweep_dir="/a") + sweep(sweep_dir="/b"))))
    assert c.n_pairs == 10 and c.sweep_dirs == ("/a", "/b")


def test_host_mismatch_flagged() -> None:
    trials = sweep()
    trials[3] = make_trial(sweep_dir="/s", mode="traceml", repeat=2, pair_position=0,
                           train_s=102.0, hostnames=("node-b",))
    c = only(analyze(frame_of(trials)))
    assert c.host_mismatch == ("/s repeat 2",)
    assert c.n_pairs == 5


def test_calibration_recovers_exact_injection() -> None:
    inj = {"step_ms": 5.0, "startup_s": 2.0, "teardown_s": 0.5}
    trials = []
    for r in range(1, 6):
        trials.append(make_trial(mode="native", repeat=r, step_ms=20.0 + r))
        trials.append(make_trial(mode="inject", repeat=r, step_ms=25.0 + r, startup_s=7.0, teardown_s=1.5, inject=inj))
    c = only(analyze(frame_of(trials)), "inject")
    assert c.role == "calibration"
    items = {i.name: i for i in c.calibration.items}
    assert items["per-step overhead"].injected == 5.0
    assert items["per-step overhead"].recovered == pytest.approx(5.0)
    assert items["startup difference"].recovered == pytest.approx(2.0)
    assert items["teardown difference"].recovered == pytest.approx(0.5)
    assert all(i.within_tolerance for i in c.calibration.items)
    assert c.calibration.all_within is True


def test_calibration_miss_detected() -> None:
    inj = {"step_ms": 5.0, "startup_s": 0.0, "teardown_s": 0.0}
    trials = []
    for r in range(1, 4):
        trials.append(make_trial(mode="native", repeat=r, step_ms=20.0))
        trials.append(make_trial(mode="inject", repeat=r, step_ms=26.0, inject=inj))
    cal = only(analyze(frame_of(trials)), "inject").calibration
    step = [i for i in cal.items if i.name == "per-step overhead"][0]
    assert step.error_pct == pytest.approx(20.0) and step.within_tolerance is False
    assert [i.within_tolerance for i in cal.items if i.injected == 0] == [None, None]
    assert cal.all_within is False


def test_aa_noise_floor_used_for_other_comparisons() -> None:
    aa_d = [-0.5, 0.5, -0.25, 0.25, 0.0]
    trials = sweep() + [t for t in sweep("native_aa", aa_d) if t["mode"] == "native_aa"]
    a = analyze(frame_of(trials))
    aa = only(a, "native_aa")
    assert aa.role == "aa"
    expected = T4 * paired_summary(aa_d).sd / math.sqrt(5)
    assert aa.metrics["throughput_overhead_pct"].half_width == pytest.approx(expected, abs=1e-6)
    tool = only(a)
    assert tool.noise_floor_pct == pytest.approx(expected, abs=1e-6)
    assert a.noise_floors == {tool.condition_id: pytest.approx(expected, abs=1e-6)}
    assert [c.mode for c in a.comparisons] == ["traceml", "native_aa"]


def test_order_effect_and_stability() -> None:
    c = only(analyze(frame_of(sweep())))
    thr = c.order_effects[0]
    assert thr.metric == "throughput_overhead_pct"
    # repeats 1, 3, 5 have traceml at position 1 (second); 2, 4 first
    assert (thr.n_mode_first, thr.n_mode_second) == (2, 3)
    assert thr.mean_mode_first == pytest.approx(3.0) and thr.mean_mode_second == pytest.approx(3.0)
    base, mode = c.stability
    assert base.mode == "native" and base.throughput_cv_pct == 0.0
    assert base.step_time_cv_within_pct == pytest.approx(1.0)  # stdev 1 ms on 100 ms
    rates = [1000 / (100 * (1 + d / 100)) for d in D]
    m = sum(rates) / 5
    cv = math.sqrt(sum((x - m) ** 2 for x in rates) / 4) / m
    assert mode.throughput_cv_pct == pytest.approx(100 * cv)


def test_duplicate_trials_prefer_ok() -> None:
    trials = sweep()
    trials.append(make_trial(sweep_dir="/s", mode="traceml", repeat=1, status="failed"))
    c = only(analyze(frame_of(trials)))
    assert c.n_pairs == 5 and c.n_excluded == 0


def test_other_baseline_and_roles() -> None:
    a = analyze(frame_of(sweep()), baseline="traceml")
    assert [c.mode for c in a.comparisons] == ["native"]
    assert only(a, "native").metrics["throughput_overhead_pct"].mean < 0
    assert only(a, "native").role == "tool"  # a baseline mode compared against another is judged like a tool


def test_roles_come_from_the_records_not_from_the_names() -> None:
    trials = sweep("inject_like")
    for t in trials:
        t["config"]["mode"]["role"] = {"native": "baseline", "inject_like": "aa"}[t["mode"]]
    assert only(analyze(frame_of(trials)), "inject_like").role == "aa"
    trials = sweep("probe")
    for t in trials:
        t["config"]["mode"]["role"] = {"native": "baseline", "probe": "calibration"}[t["mode"]]
    assert only(analyze(frame_of(trials)), "probe").role == "calibration"


@pytest.mark.parametrize("mode,role", [("native", "baseline"), ("native_aa", "aa"), ("inject", "calibration"),
                                       ("inject_big", "calibration"), ("traceml", "tool"), ("mine_aa", "aa")])
def test_a_record_written_before_modes_declared_a_role_is_read_with_the_role_its_name_implied(mode: str, role: str) -> None:
    old = make_trial(mode=mode)
    assert "role" not in old["config"]["mode"]
    assert FORMAT.upgrade(old)["config"]["mode"]["role"] == role
    declared = make_trial(mode=mode)
    declared["config"]["mode"]["role"] = "tool"
    assert FORMAT.upgrade(declared)["config"]["mode"]["role"] == "tool"


def test_json_export_is_strict_json() -> None:
    trials = sweep()[:2]
    payload = analysis_to_dict(analyze(frame_of(trials)))
    text = json.dumps(payload, allow_nan=False)
    back = json.loads(text)
    assert back["schema"] == "ddpbench.analysis" and back["schema_version"] == SCHEMA_VERSION
    comp = back["comparisons"][0]
    assert comp["metrics"]["throughput_overhead_pct"]["ci_low"] is None  # n = 1
    assert comp["verdict"]["status"] == "inconclusive"
    assert comp["label"] == "traceml vs native [cluster=local,model=tiny,stop=steps]"


def test_pair_table_and_empty_frame() -> None:
    pairs, excluded, _ = pair_table(frame_of(sweep()))
    assert len(pairs) == 5 and not excluded
    a = analyze(pd.DataFrame(columns=["sweep_dir", "condition_id", "repeat", "mode", "status"]))
    assert a.comparisons == () and a.n_trials == 0


def test_tool_step_coverage_flags_trials_whose_tool_missed_steps() -> None:
    import pandas as _pd

    from ddpbench.analysis.coverage import CoverageGap, tool_step_coverage

    frame = _pd.DataFrame({
        "condition_id": ["c"] * 4, "mode": ["native", "traceml", "traceml", "traceml"], "repeat": [1, 1, 2, 3],
        "status": ["ok", "ok", "ok", "failed"], "steps": [30, 30, 30, 30], "warmup_steps": [3, 3, 3, 3],
        "traceml_steps_analyzed": [None, 33, 0, 0],
    })
    assert tool_step_coverage(frame) == [CoverageGap("c", "traceml", 2, 0, 33)]
    assert tool_step_coverage(frame.drop(columns=["traceml_steps_analyzed"])) == []
