"""The app turns the composed config into the schema's dataclasses once; what trial.json records does not change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from ddpbench.config import ClusterConfig, DdpbenchConfig, register_configs, to_plain, typed
from ddpbench.errors import ConfigError
from ddpbench.formats.trial_record import TRIAL_FILE, config_hash
from ddpbench.sweep.validate import task_config
from ddpbench.trial.attempts import previous_ok

DATA = Path(__file__).parent / "data"

register_configs()  # the schema and the resolver of the keys no job dir names, as the app registers them


def _compose(overrides: list[str]) -> DdpbenchConfig:
    with initialize_config_module("ddpbench.conf", version_base="1.3"):
        return typed(compose("config", overrides=overrides))


def test_a_trial_written_before_the_typed_config_is_resumed_by_it(tmp_path: Path) -> None:
    """``trial-v2.json`` was written by a real trial before the config was typed: same config, same hash, resumed."""
    written = json.loads((DATA / "trial-v2.json").read_text())
    cfg = _compose(written["overrides"])
    assert to_plain(cfg) == written["config"]
    assert config_hash(to_plain(cfg)) == written["config_hash"]
    shutil.copy(DATA / "trial-v2.json", tmp_path / TRIAL_FILE)
    previous = previous_ok(tmp_path, config_hash(to_plain(cfg)))
    assert previous is not None and previous["config_hash"] == written["config_hash"]
    other = _compose([*written["overrides"], "stop.steps=21"])
    assert previous_ok(tmp_path, config_hash(to_plain(other))) is None


def test_the_typed_config_is_the_schema_s_dataclasses_with_every_value_resolved() -> None:
    cfg = _compose(["model=tiny", "mode=inject", "cluster.cpu_affinity=[0,1]", "sweep_name=s"])
    assert isinstance(cfg, DdpbenchConfig) and isinstance(cfg.cluster, ClusterConfig)
    assert cfg.cluster.cpu_affinity == [0, 1] and cfg.mode.workload_args[0] == f"--inject-step-ms={cfg.inject.step_ms}"
    with initialize_config_module("ddpbench.conf", version_base="1.3"):
        composed = compose("config", overrides=["model=tiny", "sweep_name=s"], return_hydra_config=True)
    untyped = task_config(composed)
    assert OmegaConf.get_type(untyped) is dict  # a task config without the schema's type is merged onto it
    assert to_plain(typed(untyped)) == OmegaConf.to_container(untyped, resolve=True)


def test_a_value_the_schema_cannot_hold_is_one_line_naming_the_key() -> None:
    bad = OmegaConf.create({"cluster": {"nnodes": "many"}})
    with pytest.raises(ConfigError) as caught:
        typed(bad)
    assert str(caught.value).startswith("cluster.nnodes: ") and "\n" not in str(caught.value)


def test_hydra_s_job_dir_leaves_out_the_keys_of_formats_condition() -> None:
    from ddpbench.formats.condition import NOT_IN_JOB_DIR

    with initialize_config_module("ddpbench.conf", version_base="1.3"):
        cfg = compose("config", overrides=["cluster.node_rank=0", "model=tiny", "pair_position=1", "sweep_name=x"],
                      return_hydra_config=True)
    assert list(cfg.hydra.job.config.override_dirname.exclude_keys) == list(NOT_IN_JOB_DIR)
    assert cfg.hydra.job.override_dirname == "model=tiny"
