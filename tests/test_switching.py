"""Within-trial switching (``switching=blocks``): the schedule, the estimator, the formats and real trials.

The schedule and the estimators are pure (synthetic data); the trials are real: a paired native/inject sweep
with the injected wait switched, and a TraceML trial whose switch decides which steps TraceML sees.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ddpbench.analysis.caveats import caveats
from ddpbench.analysis.paired import analyze
from ddpbench.analysis.projection import pair_value
from ddpbench.analysis.switching import TrialSwitch, combine
from ddpbench.collect.collector import flatten_trial
from ddpbench.formats import rank_record
from ddpbench.formats.switching import combine_rank_blocks
from ddpbench.report.markdown import render_report
from ddpbench.formats.switching import (block_side, block_summaries, first_side, quad_differences, step_is_on,
                                        trial_estimate)
from helpers.cli import only_sweep_dir, run_ddpbench, trials_in
from helpers.trials import make_trial

DATA = Path(__file__).parent / "data"


# --- the schedule (pure) ---
def test_blocks_come_in_abba_order_from_either_side() -> None:
    assert [block_side(b, "on") for b in range(8)] == ["on", "off", "off", "on", "on", "off", "off", "on"]
    assert [block_side(b, "off") for b in range(8)] == ["off", "on", "on", "off", "off", "on", "on", "off"]
    assert [step_is_on(s, 3, "on") for s in range(1, 10)] == [True] * 3 + [False] * 6
    sides = {first_side(seed) for seed in range(40)}
    assert sides == {"on", "off"}  # the seed draws either side
    assert first_side(7) == first_side(7)


def test_block_summaries_leave_out_the_washout() -> None:
    # the wash-out steps are 1 s, the others 0.01 s: a summary counting them would be far above 0.01
    durations = [1.0 if i % 5 < 2 else 0.01 for i in range(23)]
    blocks = block_summaries(durations, 5, 2, "off")
    assert [b["first_step"] for b in blocks] == [1, 6, 11, 16, 21]
    assert [b["side"] for b in blocks] == ["off", "on", "on", "off", "off"]
    assert [b["steps"] for b in blocks] == [5, 5, 5, 5, 3] and blocks[-1]["washout_steps"] == 2
    assert all(b["mean_s"] == pytest.approx(0.01) for b in blocks)
    assert block_summaries([0.01] * 6, 5, 2, "on")[-1]["steps"] == 5  # a last block of wash-out only is dropped


def _blocks(n_blocks: int, diff_ms: float, first: str, noise_ms: float, drift_ms: float, rng: random.Random) -> list[dict]:
    return [{"side": block_side(b, first), "first_step": b * 10 + 1, "steps": 10, "washout_steps": 1,
             "mean_ms": 10.0 + drift_ms * b + (diff_ms if block_side(b, first) == "on" else 0.0) + rng.gauss(0, noise_ms)}
            for b in range(n_blocks)]


def test_quads_cancel_a_linear_drift() -> None:
    blocks = _blocks(16, 2.0, "off", 0.0, 0.5, random.Random(1))
    assert quad_differences(blocks, 10) == pytest.approx([2.0] * 4)
    estimate = trial_estimate(blocks, 10)
    assert estimate is not None and estimate["overhead_ms"] == pytest.approx(2.0) and estimate["quads"] == 4
    assert quad_differences(blocks[:3], 10) == []  # no complete quad


# --- the estimator across trials (pure) ---
def _trial(diff_ms: float, rng: random.Random, quads: int = 10, noise_ms: float = 0.5) -> TrialSwitch:
    blocks = _blocks(4 * quads, diff_ms, rng.choice(["on", "off"]), noise_ms, 0.01, rng)
    e = trial_estimate(blocks, 10)
    assert e is not None
    return TrialSwitch(e["overhead_ms"], e["se_ms"], e["off_step_ms"], e["quads"])


def test_a_known_difference_is_recovered() -> None:
    rng = random.Random(3)
    est = combine([_trial(1.5, rng) for _ in range(5)])
    assert est is not None and est.method == "pooled" and est.quads == 50
    assert est.ci_low_ms < 1.5 < est.ci_high_ms
    assert est.half_width_ms < 0.3  # 50 quads of noise 0.5 ms: about 2 * 0.5 / sqrt(50)
    assert est.overhead_pct == pytest.approx(100 * est.overhead_ms / est.off_step_ms)


def test_a_no_op_switch_covers_zero_in_most_sweeps() -> None:
    rng = random.Random(5)
    covered = 0
    for _ in range(200):
        est = combine([_trial(0.0, rng, quads=6) for _ in range(3)])
        assert est is not None
        covered += est.ci_low_ms <= 0.0 <= est.ci_high_ms
    assert 180 <= covered <= 199  # a 95 % interval: about 190 of 200


def test_trials_that_disagree_are_combined_by_their_own_spread() -> None:
    rng = random.Random(9)
    trials = [_trial(d, rng, noise_ms=0.05) for d in (1.0, 3.0, 1.2, 2.8)]
    est = combine(trials)
    assert est is not None and est.method == "trials" and est.df == 3
    assert est.heterogeneity_p is not None and est.heterogeneity_p < 0.05
    assert combine([]) is None


# --- the analysis, the caveat and the report on synthetic trials (pure) ---
STAYS_ON = "TraceML's sampler threads and aggregator"


def _switched_trial(mode: str, repeat: int, position: int, rng: random.Random) -> dict:
    """A switched trial: native a no-op; traceml +1 ms per step switched on, +2 ms more always on."""
    first = "on" if repeat % 2 else "off"
    base = 10.0 + (2.0 if mode == "traceml" else 0.0) + rng.gauss(0, 0.3)  # each process its own speed
    ranks = []
    for rank in range(2):
        steps = []
        for step in range(400):
            on = block_side(step // 10, first) == "on"
            steps.append((base + (1.0 if on and mode == "traceml" else 0.0) + rng.gauss(0, 0.4) + 0.01 * rank) / 1000)
        ranks.append({"rank": rank, "switching": {"what": "trace_step" if mode == "traceml" else "none"},
                      "blocks": block_summaries(steps, 10, 2, first)})
    blocks = combine_rank_blocks(ranks)
    assert blocks is not None
    trial = make_trial(mode=mode, repeat=repeat, pair_position=position, job_num=2 * repeat + position,
                       step_ms=base + (0.5 if mode == "traceml" else 0.0), sweep_dir="/s")  # half the steps on
    trial["config"]["mode"]["switch"] = {"what": ranks[0]["switching"]["what"], "stays_on": STAYS_ON}
    trial["switching"] = {"what": ranks[0]["switching"]["what"], "block_steps": 10, "washout_steps": 2,
                          "first_side": first, "seed": repeat, "blocks": blocks, "estimate": trial_estimate(blocks, 10)}
    return trial


def test_within_trial_figure_below_the_between_trial_one_names_what_stays_on() -> None:
    rng = random.Random(2)  # one draw: the intervals below are 95 % ones (tests above check their coverage)
    trials = [_switched_trial(m, r, i if r % 2 else 1 - i, rng) for r in range(1, 6) for i, m in enumerate(("native", "traceml"))]
    frame = pd.DataFrame([flatten_trial(t, f"/s/{i}/trial.json") for i, t in enumerate(trials)])
    analysis = analyze(frame)
    (c,) = analysis.comparisons
    sw, floor = c.switched, c.switched_base
    assert sw is not None and floor is not None and sw.what == "trace_step" and sw.stays_on == STAYS_ON
    assert sw.ci_low_ms < 1.0 < sw.ci_high_ms and sw.n_trials == 5 and sw.quads == 50  # the switched 1 ms
    assert sw.between_pairs == 5 and sw.between_low_ms > 2.0  # on-blocks across processes: 3 ms in all
    assert floor.ci_low_ms < 0.0 < floor.ci_high_ms  # native's no-op switch: the floor covers 0
    notes = [n for n in caveats(analysis) if "does not turn off" in n]
    assert len(notes) == 1 and STAYS_ON in notes[0]
    text = render_report(analysis, frame, {}, ["/s"])
    assert "within-trial (switch `trace_step`, 5 trial(s), 50 quads" in text and "**Within-trial**" in text
    assert all(math.isfinite(pair_value(p, "switched_step_overhead_ms", 3600.0)) for p in c.pairs)
    # the whole-trial figures describe the tool fully on: 3 ms a step, the off-blocks counted at the on-blocks' step,
    # which is the whole-run mix's difference plus half the switched 1 ms; the verdict weighs them with the lower bound
    step = c.metrics["step_overhead_ms"]
    mixed = frame.groupby("mode")["step_time_ms_mean"].mean()
    assert step.mean - (mixed["traceml"] - mixed["native"]) == pytest.approx(0.5, abs=0.1)
    assert step.ci_low < 3.0 < step.ci_high
    v = c.verdict
    assert v.status == "over" and {"step_overhead_pct", "switched_overhead_pct"} <= set(v.decided_by), v
    assert v.assumption_holds is True and v.lower_bound_confidence == 0.975
    line = next(line for line in text.splitlines() if line.startswith("- traceml vs native"))
    assert "**over** (decided by: between-trial per-step" in line, line
    assert "within-trial lower bound +" in line and "(97.5 %): over" in line, line


# --- the formats ---
def test_old_rank_records_still_read_and_a_real_v3_record_carries_its_blocks(tmp_path: Path) -> None:
    old, problems = rank_record.read_rank_record(DATA / "rank-v1.json")
    assert problems == [] and old is not None
    assert old["schema_version"] == 1 and old["switching"] is None and old["blocks"] is None
    v2 = tmp_path / "rank-v2.json"
    v2.write_text(json.dumps({**rank_record.upgrade_rank_record(json.loads((DATA / "rank-v1.json").read_text())),
                              "schema_version": 2}))
    upgraded, problems = rank_record.read_rank_record(v2)
    assert problems == [] and upgraded is not None and upgraded["blocks"] is None
    real, problems = rank_record.read_rank_record(DATA / "rank-v3.json")
    assert problems == [] and real is not None and real["switching"]["what"] == "inject"
    assert [b["side"] for b in real["blocks"][:4]] in (["on", "off", "off", "on"], ["off", "on", "on", "off"])
    broken = {**real, "blocks": [{"side": "sideways"}]}
    assert any(p.startswith("blocks[0]") for p in rank_record.validate_rank_record(broken))


# --- real trials ---
def _check_blocks(trial: dict, block_steps: int) -> None:
    """Every rank's blocks alternate ABBA from the recorded first side, on the same steps on every rank."""
    attempt = Path(trial["attempt"]["dir"])
    records = [json.loads(p.read_text()) for p in sorted((attempt / "metrics").glob("rank-*.json"))]
    assert len(records) == 2
    first = records[0]["switching"]["first_side"]
    assert first == first_side(records[0]["switching"]["seed"])
    for record in records:
        assert record["switching"] == records[0]["switching"]
        sides = [b["side"] for b in record["blocks"]]
        assert sides == [block_side(i, first) for i in range(len(sides))]
        assert [b["first_step"] for b in record["blocks"]] == list(range(1, trial["steps"] + 1, block_steps))
    assert trial["switching"]["estimate"]["quads"] == trial["steps"] // (4 * block_steps)


def _on_block_mean_ms(trial: dict) -> float:
    """The mean step of a trial's on-blocks, wash-out steps left out, ms (from the trial record's blocks)."""
    kept = [(b["mean_ms"], b["steps"] - b["washout_steps"]) for b in trial["switching"]["blocks"] if b["side"] == "on"]
    return sum(mean * n for mean, n in kept) / sum(n for _, n in kept)


@pytest.mark.slow
def test_switched_injected_wait_is_recovered_within_the_trials(tmp_path: Path) -> None:
    """native (a no-op switch) and inject (the 20 ms wait switched): the within-trial figure finds the wait.

    Not a quiet test: the on- and off-blocks share each process's load, so the figure holds beside other tests
    (measured with two CPU-spinning processes beside it, three runs: 21.35, 21.44 and 21.41 ms; alone 21.19 ms;
    the +7 % is this VM's slower work right after a sleep, docs/accuracy.md). In the whole suite, at load 4.5 on
    the 2 cores, each sleep's wake-up waited for a core as well: 25.55 ms (2026-12-04); hence the bound above
    is +35 %, and the calibration's own 10 % judgement is checked for what it says, not for its outcome."""
    run = run_ddpbench(["-m", "mode=native,inject", "repeat=1-2", "model=tiny", "stop.steps=240", "switching=blocks",
                        "switching.block_steps=10", "inject.step_ms=20", "inject.startup_s=0", "inject.teardown_s=0"],
                       tmp_path, timeout=400)
    assert run.returncode == 0, run.output
    sweep = only_sweep_dir(tmp_path)
    trials = trials_in(sweep)
    assert all(t["status"] == "ok" for t in trials)
    for t in trials:
        _check_blocks(t, 10)
        assert t["switching"]["what"] == ("inject" if t["mode"] == "inject" else "none")
    assert len({t["switching"]["seed"] for t in trials if t["mode"] == "native"}) == 2  # drawn per repeat
    analysis = json.loads((sweep / "analysis.json").read_text())
    (comparison,) = analysis["comparisons"]
    within, floor = comparison["switched"], comparison["switched_base"]
    assert 19.0 <= within["overhead_ms"] <= 27.0  # the injected cost, inside the processes, late wake-ups added
    # what paired trials see of the same steps, one value a pair: the inject trial's on-blocks against native's.
    # It holds the wait plus whatever differs between two processes (here the inject trials' off-blocks ran 2-3x
    # slower than native's steps, after their sleeps): it must see the wait, come from the records, and be named
    # in the caveat only when the within-trial figure lies below its interval
    by_run = {(t["repeat"], t["mode"]): _on_block_mean_ms(t) for t in trials}
    per_pair = [by_run[(repeat, "inject")] - by_run[(repeat, "native")] for repeat in (1, 2)]
    assert within["between_pairs"] == 2 and within["between_ms"] == pytest.approx(sum(per_pair) / 2, abs=1e-9)
    assert within["between_low_ms"] <= within["between_ms"] <= within["between_high_ms"]
    assert min(per_pair) > 10.0, per_pair  # the 20 ms wait is there between the trials too, in each pair
    calibrated = {item["name"]: item for item in comparison["calibration"]["items"]}
    item = calibrated["within-trial per-step cost"]
    assert item["injected"] == 20.0 and item["recovered"] == pytest.approx(within["overhead_ms"])
    assert item["within_tolerance"] is (abs(within["overhead_ms"] / 20.0 - 1) <= 0.10)
    assert floor["ci_low_ms"] < within["ci_low_ms"] and abs(floor["overhead_ms"]) < 2.0  # the no-op switch: a floor
    report = (sweep / "report.md").read_text()
    assert "within-trial (switch `inject`" in report and "no-op switch (native, noise floor)" in report
    below = within["overhead_ms"] < within["between_low_ms"]
    assert ("lies below the between-trial interval" in report) == below, (within, report)
    (plot,) = (sweep / "plots").glob("*-blocks.png")  # block times by side over the trial
    assert plot.stat().st_size > 1000 and f"plots/{plot.name}" in report


@pytest.mark.slow
def test_traceml_sees_only_the_switched_on_steps(tmp_path: Path) -> None:
    """TraceML's trace_step wraps the on-blocks only (its own count says so), and its summary is still written."""
    run = run_ddpbench(["mode=traceml", "model=tiny", "stop.steps=160", "stop.warmup_steps=4", "switching=blocks",
                        "switching.block_steps=10", "sweep_name=tm"], tmp_path, timeout=300)
    assert run.returncode == 0, run.output
    (trial,) = [json.loads(p.read_text()) for p in (tmp_path / "outputs" / "runs").glob("*/trial.json")]
    assert trial["status"] == "ok" and trial["tool"]["usable"] is True
    _check_blocks(trial, 10)
    on_steps = sum(b["steps"] for b in trial["switching"]["blocks"] if b["side"] == "on")
    assert on_steps == 80
    assert trial["traceml"]["steps_analyzed"] == 4 + on_steps  # warm-up + the on-blocks, nothing of the off-blocks
    shutil.rmtree(tmp_path / "outputs", ignore_errors=True)
