"""The app turns the composed config into the schema's dataclasses once; what trial.json records does not change."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from ddpbench.choices import Choice
from ddpbench.config import ClusterConfig, DdpbenchConfig, register_configs, typed
from ddpbench.errors import ConfigError
from ddpbench.formats.trial_record import TRIAL_FILE, config_hash
from ddpbench.sweep.validate import composed_jobs
from ddpbench.trial.attempts import previous_ok

DATA = Path(__file__).parent / "data"

register_configs()  # the schema and the resolver of the keys no job dir names, as the app registers them


def _compose(overrides: list[str]) -> DdpbenchConfig:
    with initialize_config_module("ddpbench.conf", version_base="1.3"):
        return typed(compose("config", overrides=overrides))


#: defaults changed since trial-v2.json was written: repeat=auto decides on the projected overhead the headline
#: judges; a framework script gets the recorder unless told not to (null)
CHANGED_DEFAULTS = (("precision", "metric"), ("workload", "records"))


def _common(written: Any, now: Any) -> Any:
    """``now`` cut down to the keys ``written`` has (keys the schema gained since are left out)."""
    if isinstance(written, dict) and isinstance(now, dict):
        return {k: _common(v, now[k]) for k, v in written.items() if k in now}
    return now


def test_every_key_a_trial_recorded_before_the_typed_config_keeps_its_value(tmp_path: Path) -> None:
    """``trial-v2.json`` was written by a real trial before the config was typed: each key it holds has the same
    value now (the schema has gained keys since, so its hash differs and a resume re-runs it in a new attempt)."""
    written = json.loads((DATA / "trial-v2.json").read_text())
    cfg = _compose(written["overrides"])
    now = _common(written["config"], asdict(cfg))
    for group, key in CHANGED_DEFAULTS:  # deliberate changes of a default since
        assert now[group].pop(key) != written["config"][group].pop(key)
    assert now == written["config"]
    current = {**written, "config": asdict(cfg), "config_hash": config_hash(asdict(cfg))}
    (tmp_path / TRIAL_FILE).write_text(json.dumps(current))
    previous = previous_ok(tmp_path, config_hash(asdict(cfg)))
    assert previous is not None and previous["config_hash"] == current["config_hash"]
    other = _compose([*written["overrides"], "stop.steps=21"])
    assert previous_ok(tmp_path, config_hash(asdict(other))) is None


def test_the_typed_config_is_the_schema_s_dataclasses_with_every_value_resolved() -> None:
    cfg = _compose(["model=tiny", "mode=inject", "cluster.cpu_affinity=[0,1]", "sweep_name=s"])
    assert isinstance(cfg, DdpbenchConfig) and isinstance(cfg.cluster, ClusterConfig)
    assert cfg.cluster.cpu_affinity == [0, 1] and cfg.mode.workload_args[0] == f"--inject-step-ms={cfg.inject.step_ms}"
    with initialize_config_module("ddpbench.conf", version_base="1.3"):
        composed = compose("config", overrides=["model=tiny", "sweep_name=s"], return_hydra_config=True)
    untyped = OmegaConf.masked_copy(composed, [str(k) for k in composed if k != "hydra"])
    assert OmegaConf.get_type(untyped) is dict  # a task config without the schema's type is merged onto it
    assert asdict(typed(untyped)) == asdict(typed(composed)) == OmegaConf.to_container(untyped, resolve=True)


def test_a_value_the_schema_cannot_hold_is_one_line_naming_the_key() -> None:
    bad = OmegaConf.create({"cluster": {"nnodes": "many"}})
    with pytest.raises(ConfigError) as caught:
        typed(bad)
    assert str(caught.value).startswith("cluster.nnodes: ") and "\n" not in str(caught.value)


@pytest.mark.parametrize(("added", "message"), [
    ("+cluster.nope=1", "cluster.nope: Key 'nope' not in 'ClusterConfig'"),
    ("+workload.nope=1", "workload.nope: Key 'nope' not in 'WorkloadConfig'"),
    ("+cluster.slurm.nope=1", "cluster.slurm.nope: Key 'nope' not in 'SlurmConfig'"),
])
def test_a_key_the_schema_lacks_is_refused_in_one_line(added: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _compose([added, "sweep_name=s"])
    assert str(caught.value) == message


def test_the_user_named_keys_of_a_dict_are_not_refused() -> None:
    cfg = _compose(["+cluster.slurm.additional_parameters.constraint=t4", "+mode.env.X=1", "sweep_name=s"])
    assert cfg.cluster.slurm.additional_parameters == {"constraint": "t4"} and cfg.mode.env["X"] == "1"


def test_hydra_s_job_dir_leaves_out_the_keys_of_formats_condition() -> None:
    from ddpbench.formats.condition import NOT_IN_JOB_DIR

    with initialize_config_module("ddpbench.conf", version_base="1.3"):
        cfg = compose("config", overrides=["cluster.node_rank=0", "model=tiny", "pair_position=1", "sweep_name=x"],
                      return_hydra_config=True)
    assert list(cfg.hydra.job.config.override_dirname.exclude_keys) == list(NOT_IN_JOB_DIR)
    assert cfg.hydra.job.override_dirname == "model=tiny"


def test_a_sweeps_jobs_composed_once_per_mode_are_the_configs_hydra_composes_one_by_one() -> None:
    jobs = [[f"mode={mode}", f"repeat={repeat}", f"pair_position={position}", "model=tiny", "sweep_name=s"]
            for repeat, modes in ((1, ("native", "traceml")), (2, ("traceml", "native")))
            for position, mode in enumerate(modes)]
    with initialize_config_module("ddpbench.conf", version_base="1.3"):
        master = compose(config_name="config", overrides=["sweep_name=s"], return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        composed = composed_jobs(SimpleNamespace(config_loader=loader), master, jobs)
        one_by_one = [typed(loader.load_sweep_config(master, job)) for job in jobs]
    assert composed == one_by_one
    assert [(c.mode.name, c.repeat, c.pair_position) for c in composed] == [
        ("native", 1, 0), ("traceml", 1, 1), ("traceml", 2, 0), ("native", 2, 1)]
    assert composed[0].stop is not composed[3].stop  # each job's own config: nothing shared between jobs


@pytest.mark.parametrize("choice", Choice.__subclasses__(), ids=lambda choice: choice.__name__)
def test_every_closed_choice_is_named_by_its_value_and_reads_as_it(choice: Any) -> None:
    """YAML and overrides give a member by name (OmegaConf), records and messages show its value."""
    for member in choice:
        assert member.name == member.value == member == str(member) == f"{member}" and repr(member) == repr(member.value)
        assert json.dumps({member: member}) == json.dumps({member.value: member.value})
