"""Pure tests of the paired sweeper's ordering and repeat expansion."""

from __future__ import annotations

from collections import Counter

import pytest

from ddpbench.sweep.order import (
    SweepOrderError,
    expand_repeat,
    mode_order,
    order_jobs,
    williams_rows,
)


def test_expand_repeat_ranges_lists_and_singletons() -> None:
    assert expand_repeat(["1-5"]) == [1, 2, 3, 4, 5]
    assert expand_repeat(["1", "2", "3"]) == [1, 2, 3]
    assert expand_repeat(["7"]) == [7]
    assert expand_repeat(["1-2", "5"]) == [1, 2, 5]


@pytest.mark.parametrize("bad", ["5-1", "a-b", "1.5", "", "0-2", "x"])
def test_expand_repeat_rejects_bad_ranges(bad: str) -> None:
    with pytest.raises(SweepOrderError, match="repeat="):
        expand_repeat([bad])


def test_expand_repeat_rejects_duplicates() -> None:
    with pytest.raises(SweepOrderError, match="twice"):
        expand_repeat(["1-3", "2"])


def test_two_modes_alternate_by_repeat_value() -> None:
    jobs = order_jobs({"mode": ["mode=native", "mode=traceml"], "repeat": ["repeat=1-4"]})
    assert [job.overrides for job in jobs] == [
        ("mode=native", "repeat=1"), ("mode=traceml", "repeat=1"),
        ("mode=traceml", "repeat=2"), ("mode=native", "repeat=2"),
        ("mode=native", "repeat=3"), ("mode=traceml", "repeat=3"),
        ("mode=traceml", "repeat=4"), ("mode=native", "repeat=4"),
    ]
    assert [job.pair_position for job in jobs] == [0, 1] * 4


def test_rerunning_one_repeat_reproduces_its_order() -> None:
    jobs = order_jobs({"mode": ["mode=native", "mode=traceml"], "repeat": ["repeat=2"]})
    assert [job.overrides[0] for job in jobs] == ["mode=traceml", "mode=native"]


def test_other_swept_keys_vary_slowest() -> None:
    jobs = order_jobs({
        "model": ["model=tiny", "model=small"],
        "mode": ["mode=native", "mode=traceml"],
        "repeat": ["repeat=1-2"],
    })
    models = [job.overrides[0] for job in jobs]
    assert models == ["model=tiny"] * 4 + ["model=small"] * 4
    assert [job.overrides[1] for job in jobs[:4]] == ["mode=native", "mode=traceml", "mode=traceml", "mode=native"]


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_williams_rows_balance_positions_and_carryover(n: int) -> None:
    rows = williams_rows(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    for position in range(n):
        counts = Counter(row[position] for row in rows)
        assert set(counts.values()) == {len(rows) // n}, counts
    follows = Counter((row[i], row[i + 1]) for row in rows for i in range(n - 1))
    assert len(set(follows.values())) == 1
    assert len(follows) == n * (n - 1)


def test_three_modes_each_position_equally_over_a_cycle() -> None:
    modes = ["native", "traceml", "traceml_manual"]
    orders = [mode_order(modes, r) for r in range(1, 7)]
    for position in range(3):
        assert Counter(order[position] for order in orders) == Counter({m: 2 for m in modes})


def test_duplicate_mode_is_an_error() -> None:
    with pytest.raises(SweepOrderError, match="twice"):
        order_jobs({"mode": ["mode=native", "mode=native"]})


def test_no_mode_or_repeat_gives_plain_product() -> None:
    jobs = order_jobs({"model": ["model=tiny", "model=small"]})
    assert [job.overrides for job in jobs] == [("model=tiny",), ("model=small",)]


@pytest.mark.parametrize("repeat", ["repeat=1-3", "repeat=range(1,4)", "repeat=1,2,3"])
def test_sweeper_expands_every_hydra_repeat_syntax(repeat: str) -> None:
    from omegaconf import OmegaConf

    from ddpbench.sweep.driver import SweepDriver
    from hydra_plugins.ddpbench_sweeper.paired_sweeper import PairedSweeper

    sweeper = PairedSweeper(max_batch_size=1)
    sweeper.config = OmegaConf.create({})
    batches = sweeper.batches(SweepDriver(sweeper).jobs(["mode=native,traceml", repeat, "model=tiny",
                                                         "sweep_name=ignored", "pair_position=7"], "s"))
    jobs = [batch[0] for batch in batches]
    assert len(jobs) == 6 and all(len(batch) == 1 for batch in batches)
    assert [(j[1], j[2], j[3]) for j in jobs[:4]] == [
        ("mode=native", "repeat=1", "pair_position=0"), ("mode=traceml", "repeat=1", "pair_position=1"),
        ("mode=traceml", "repeat=2", "pair_position=0"), ("mode=native", "repeat=2", "pair_position=1"),
    ]
    assert all(j[0] == "model=tiny" and j[-1] == "sweep_name=s" for j in jobs)
