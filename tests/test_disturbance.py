"""Disturbed trials, disturbed pairs and outlying pairs (ddpbench.analysis.disturbance), on
synthetic load figures."""

from __future__ import annotations

import math

import pytest

from ddpbench.analysis.disturbance import (
    FOREIGN_CPU_SHARE_MAX,
    TrialLoad,
    modified_z_scores,
    outlier_pairs,
    trial_disturbance,
)

QUIET = TrialLoad(wall_s=60.0, n_cpus=2, own_cpus=2.0, load1_start=1.9, load1_end=2.3, foreign_cpu_s=0.6, steal_s=0.0)


def test_quiet_trial_is_not_flagged() -> None:
    assert trial_disturbance(QUIET) is None


def test_foreign_cpu_above_threshold_is_flagged() -> None:
    # a report job beside the trial: one core busy for half the trial = 25 % of 2 CPUs
    busy = TrialLoad(60.0, 2, 2.0, 2.0, 3.1, foreign_cpu_s=30.0, steal_s=0.0)
    reason = trial_disturbance(busy)
    assert reason == "other processes used 30.0 CPU s (25 % of 2 CPUs)"
    at_edge = TrialLoad(60.0, 2, 2.0, foreign_cpu_s=FOREIGN_CPU_SHARE_MAX * 120.0)
    assert trial_disturbance(at_edge) is None


def test_steal_is_flagged() -> None:
    reason = trial_disturbance(TrialLoad(100.0, 4, 2.0, foreign_cpu_s=0.0, steal_s=12.0))
    assert reason == "steal time 12.0 CPU s (3 %)"


def test_load_average_counts_only_without_cpu_accounting() -> None:
    loaded = TrialLoad(60.0, 2, 2.0, load1_start=2.0, load1_end=3.5)
    assert trial_disturbance(loaded) == "load average 3.50 with 2 own busy CPUs on 2 CPUs"
    assert trial_disturbance(TrialLoad(60.0, 2, 2.0, load1_start=2.0, load1_end=2.9)) is None
    # measured CPU time of other processes is the better evidence and overrides the load average
    assert trial_disturbance(TrialLoad(60.0, 2, 2.0, load1_start=2.0, load1_end=3.5, foreign_cpu_s=1.0)) is None


def test_several_reasons_join_on_one_line() -> None:
    reason = trial_disturbance(TrialLoad(10.0, 2, 2.0, foreign_cpu_s=5.0, steal_s=1.0))
    assert reason is not None and "; " in reason and "\n" not in reason


@pytest.mark.parametrize(
    "load,message",
    [
        (TrialLoad(0.0, 2, 2.0), "wall_s must be positive, got 0.0"),
        (TrialLoad(float("nan"), 2, 2.0), "wall_s must be positive, got nan"),
        (TrialLoad(10.0, 0, 2.0), "n_cpus must be at least 1, got 0"),
    ],
)
def test_bad_load_raises(load: TrialLoad, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trial_disturbance(load)


def test_modified_z_scores_known_values() -> None:
    # median 3, |deviations| 2 1 0 1 7 -> MAD 1, scale 1.4826
    z = modified_z_scores([1.0, 2.0, 3.0, 4.0, 10.0])
    assert z == pytest.approx([-2 / 1.4826, -1 / 1.4826, 0.0, 1 / 1.4826, 7 / 1.4826])


def test_modified_z_scores_zero_mad_falls_back_to_mean_deviation() -> None:
    z = modified_z_scores([5.0, 5.0, 5.0, 5.0, 9.0])
    assert z[-1] == pytest.approx(4.0 / (1.2533 * 0.8))
    assert modified_z_scores([2.0, 2.0, 2.0]) == [0.0, 0.0, 0.0]
    assert all(math.isnan(v) for v in modified_z_scores([1.0, 9.0]))


def test_one_fallen_trial_in_an_aa_sweep_flags_its_pair() -> None:
    # an A/A sweep where one trial fell from ~41 to 26.9 steps/s: that pair's overhead is ~+52 %
    overheads = [0.8, -1.1, 0.3, 52.4, -0.4]
    flags = outlier_pairs(overheads)
    assert flags[:3] == [None, None, None] and flags[4] is None
    assert flags[3] is not None and flags[3].startswith("overhead +52.4 % is ") and "from the median +0.3 %" in flags[3]


def test_no_outliers_in_gaussian_like_spread() -> None:
    assert outlier_pairs([1.0, 1.5, 0.7, 1.2, 0.9, 1.3, 1.1], unit="ms") == [None] * 7
    assert outlier_pairs([1.0, 80.0]) == [None, None]
    with pytest.raises(ValueError, match="values must be finite numbers"):
        outlier_pairs([1.0, float("nan"), 2.0])
