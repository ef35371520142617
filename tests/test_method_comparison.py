"""benchmarks/method_comparison.py's statistics (benchmarks/_method_stats.py) on synthetic measurements: each
method's estimate of the per-step cost, its stated interval, the verdict, and the summary over campaigns."""

from __future__ import annotations

import math
import random
import statistics
import sys
from pathlib import Path

import pytest

from ddpbench.choices import Verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _method_stats import (Estimate, Method, ddpbench_estimate, harness_estimate, noise_floor,  # noqa: E402
                           percentile, seed_estimate, summarize, units_for_budget, whole_process_estimate)


def test_seed_estimate_is_the_throughput_ratio_and_its_standard_error() -> None:
    # a 10 % slower step is 1/1.1 of the throughput
    est = seed_estimate([100.0, 102.0, 98.0], [100 / 1.1, 102 / 1.08, 98 / 1.12])
    assert est.pct == pytest.approx(100 * (100.0 / statistics.fmean([100 / 1.1, 102 / 1.08, 98 / 1.12]) - 1))
    assert est.half_width_pct == pytest.approx(statistics.stdev([10.0, 8.0, 12.0]) / math.sqrt(3))
    assert est.n == 3
    assert math.isnan(seed_estimate([100.0], [90.0]).half_width_pct)
    with pytest.raises(ValueError):
        seed_estimate([100.0, 99.0], [90.0])


def test_whole_process_takes_out_the_fixed_cost_with_the_short_runs() -> None:
    # native: 4 s fixed + 1,000 steps of 2 ms; tool: 9 s fixed + steps of 2.2 ms (+10 %); short runs: 10 steps
    native_long, tool_long = [4 + 2.0, 4 + 2.0], [9 + 2.2, 9 + 2.2]
    native_short, tool_short = [4 + 0.02, 4 + 0.02], [9 + 0.022, 9 + 0.022]
    est = whole_process_estimate(native_long, tool_long, native_short, tool_short)
    assert est.pct == pytest.approx(10.0)
    assert est.half_width_pct == 0.0
    # the naive wall difference over the steps would have put the fixed cost into every step
    naive = 100 * (statistics.fmean(tool_long) - statistics.fmean(native_long)) / (1000 * 0.002)
    assert naive == pytest.approx(260.0)


def test_whole_process_states_hyperfines_propagated_sd() -> None:
    est = whole_process_estimate([6.0, 6.2], [11.0, 11.4], [4.0, 4.0], [9.0, 9.0])
    native = 6.1 - 4.0
    sd = math.sqrt(statistics.stdev([6.0, 6.2]) ** 2 + statistics.stdev([11.0, 11.4]) ** 2)
    assert est.half_width_pct == pytest.approx(100 * sd / native)
    with pytest.raises(ValueError, match="not longer"):
        whole_process_estimate([4.0], [5.0], [4.5], [5.0])


def test_percentile_interpolates_like_numpy() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert percentile(values, 50.0) == 3.0
    assert percentile(values, 95.0) == pytest.approx(4.8)
    assert percentile([7.0], 95.0) == 7.0


def test_harness_median_of_medians_and_its_noise_floor() -> None:
    base = [[1.0, 2.0, 3.0], [2.0, 2.0, 2.0], [1.0, 3.0, 9.0]]
    tool = [[2.0, 2.2, 2.4], [2.2, 2.2, 2.2], [2.0, 2.4, 2.6]]
    est = harness_estimate(base, tool)
    assert est.pct == pytest.approx(10.0)  # medians 2, 2, 3 -> 2; 2.2, 2.2, 2.4 -> 2.2
    pooled = [s for p in base for s in p]
    floor = max(statistics.pstdev(pooled), percentile(pooled, 95) - percentile(pooled, 50))
    assert noise_floor(pooled) == pytest.approx(floor)
    assert est.half_width_pct == pytest.approx(100 * floor / 2.0)
    assert est.covers(0.0)  # a 10 % cost inside a step CV this large is "within noise"


def test_ddpbench_estimate_reads_the_report_interval() -> None:
    est = ddpbench_estimate({"mean": 3.0, "ci_low": 1.0, "ci_high": 5.0}, 5)
    assert (est.pct, est.half_width_pct, est.n) == (3.0, 2.0, 5)
    assert math.isnan(ddpbench_estimate({"mean": 3.0, "ci_low": None, "ci_high": None}, 1).half_width_pct)


def test_verdict_and_cover() -> None:
    assert Estimate(5.0, 2.0, 5).status(2.0) is Verdict.over
    assert Estimate(-1.0, 2.0, 5).status(2.0) is Verdict.within
    assert Estimate(1.0, 2.0, 5).status(2.0) is Verdict.inconclusive
    assert Estimate(9.0, float("nan"), 1).status(2.0) is Verdict.inconclusive
    assert Estimate(1.0, 2.0, 5).covers(3.0) and not Estimate(1.0, 2.0, 5).covers(3.5)


def test_units_for_budget_never_below_two() -> None:
    assert units_for_budget(180, 40) == 4
    assert units_for_budget(40, 90) == 2
    with pytest.raises(ValueError):
        units_for_budget(40, 0)


def test_summary_spread_ratio_coverage_and_aa_rates() -> None:
    rng = random.Random(0)
    truth = 10.0
    tool = {Method.ddpbench: [Estimate(truth + rng.gauss(0, 1), 2.5, 5) for _ in range(400)],
            Method.seed: [Estimate(truth + rng.gauss(0, 3), 0.5, 5) for _ in range(400)]}
    aa = {Method.ddpbench: [Estimate(rng.gauss(0, 1), 2.5, 5) for _ in range(400)],
          Method.seed: [Estimate(rng.gauss(0, 3), 0.5, 5) for _ in range(400)]}
    machine = {Method.ddpbench: [180.0, 170.0], Method.seed: [175.0]}
    out = {s.method: s for s in summarize(tool, aa, machine, budget_pct=2.0)}
    ref, seed = out[Method.ddpbench], out[Method.seed]
    assert ref.sd_ratio == pytest.approx(1.0)
    assert seed.sd_ratio == pytest.approx(3.0, rel=0.15)
    assert ref.others_pct == pytest.approx(statistics.fmean(e.pct for e in tool[Method.seed]))
    assert ref.covers_others > 0.9  # ±2.5 around an SD of 1
    assert seed.covers_others < 0.3  # ±0.5 around an SD of 3: its interval is far too narrow
    assert ref.aa_false_over == 0.0  # ±2.5 around an SD of 1: "over" needs an estimate above +4.5
    assert ref.aa_within == pytest.approx(0.5 * math.erfc(0.5 / math.sqrt(2)), abs=0.05)  # below -0.5
    assert seed.aa_false_over == pytest.approx(0.5 * math.erfc(2.5 / 3 / math.sqrt(2)), abs=0.05)
    assert seed.aa_excludes_zero > 0.8
    assert ref.machine_s == 175.0 and seed.campaigns == 400 and seed.aa_campaigns == 400


def test_summary_of_a_method_not_run() -> None:
    out = summarize({Method.ddpbench: [], Method.harness: [Estimate(1.0, 1.0, 2), Estimate(2.0, 1.0, 2)]}, {}, {}, 2.0)
    by = {s.method: s for s in out}
    assert by[Method.ddpbench].campaigns == 0 and math.isnan(by[Method.ddpbench].mean_pct)
    assert math.isnan(by[Method.harness].sd_ratio)  # no reference spread to compare with
    assert math.isnan(by[Method.harness].others_pct) and math.isnan(by[Method.harness].aa_false_over)


def test_a_campaign_without_an_interval_counts_in_the_spread_not_the_half_width() -> None:
    # a sweep that lost a pair: one pair, no interval
    out = summarize({Method.ddpbench: [Estimate(1.0, 2.0, 2), Estimate(3.0, 4.0, 2), Estimate(8.0, math.nan, 1)]},
                    {}, {}, 2.0)
    assert out[0].half_width_pct == 3.0 and out[0].sd_pct == pytest.approx(statistics.stdev([1.0, 3.0, 8.0]))
