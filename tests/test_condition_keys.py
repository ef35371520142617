"""The keys that are not part of a condition are one list: the runner, the sweep and Hydra's job dir agree."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ddpbench.errors import ConfigError
from ddpbench.formats.condition import SWEEPER_KEYS, override_key, parse_overrides
from ddpbench.formats.trial_record import config_hash
from ddpbench.sweep.adaptive import condition_key, repeat_of
from ddpbench.sweep.progress import Progress
from ddpbench.trial.job import JobInfo
from ddpbench.trial.record import condition_of

SWEPT = ["model=tiny", "stop.steps=20", "mode=traceml", "repeat=3", "pair_position=1", "sweep_name=s"]


def _job(overrides: list[str]) -> JobInfo:
    return JobInfo(job_dir=Path("j"), sweep_dir=Path("s"), job_num=0, overrides=overrides,
                   choices={"cluster": "static_2node", "model": "tiny", "stop": "steps"}, multirun=True)


def test_every_node_driver_of_a_trial_sees_the_same_condition() -> None:
    """Node 1's driver (``cluster.node_rank=1`` among its overrides) groups and records its jobs as node 0's does."""
    node0, node1 = SWEPT + ["cluster.node_rank=0"], SWEPT + ["cluster.node_rank=1"]
    assert condition_key(node0) == condition_key(node1) == ("model=tiny", "stop.steps=20")
    assert condition_of(_job(node0)) == condition_of(_job(node1))
    recorded = condition_of(_job(node1))
    assert {f"{k}={v}" for k, v in recorded.items() if k not in ("cluster", "model", "stop")} == {"stop.steps=20"}


def test_the_driver_keys_are_hidden_and_left_out_of_the_hash_and_the_job_dir() -> None:
    shown = io.StringIO()
    Progress(1, out=shown).starting([SWEPT])
    assert shown.getvalue() == "[1/1] start model=tiny stop.steps=20 mode=traceml repeat=3\n"
    assert not any(f" {key}=" in shown.getvalue() for key in SWEEPER_KEYS)
    config = {"model": {"batch_size": 8}, "pair_position": 0, "sweep_name": "a"}
    assert config_hash(config) == config_hash({**config, "pair_position": 1, "sweep_name": "b"})
    assert config_hash(config) != config_hash({**config, "model": {"batch_size": 9}})


def test_an_override_is_read_as_hydra_reads_it() -> None:
    """Its key without ``+``/``++``/``~``, a quoted value holding ``=``, a sweep; anything else is one line."""
    assert [override_key(o) for o in ("+model.x=1", "++stop.steps=3", "~fault.rank", "workload.args='--a=1'")] == [
        "model.x", "stop.steps", "fault.rank", "workload.args"]
    assert repeat_of(["mode=traceml", "++repeat=3", "model=tiny"]) == 3
    assert [o.value() for o in parse_overrides(["workload.args='--a=1'", "repeat=3"])] == ["--a=1", 3]
    with pytest.raises(ConfigError, match=r"^'-m' is not a key=value override$"):
        parse_overrides(["model=tiny", "-m"])
