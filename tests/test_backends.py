"""Cluster backends behind one interface: the registry by kind, each backend's own rules and hooks."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ddpbench import cluster
from ddpbench.errors import ConfigError
from ddpbench.trial import command as commands
from ddpbench.trial.job import JobInfo
from ddpbench.versions.arm import resolve_arm

CUSTOM_BACKEND = '''
from ddpbench.cluster.base import Backend, NodePlan, register


class Here(Backend):
    kind = "{kind}"

    def plan(self, cfg, job, timeout_s):
        return NodePlan(node_ranks=[0], master_addr="10.0.0.1", master_port=1000 + job.job_num,
                        aggregator_port=2000, owner=True, retry_on_port_clash=False, run_token=str(timeout_s))

    def rendezvous_env(self, cfg, run_name):
        return {{"HERE_RUN": run_name}}


register(Here())
'''


from ddpbench.config import DdpbenchConfig, typed_trial  # noqa: E402


def _cfg(**cluster_keys: object):
    base = {"kind": "local", "nnodes": 2, "nproc_per_node": 1, "node_rank": 0, "shared_dir": True,
            "master_addr": "127.0.0.1", "base_port": 0, "rendezvous_timeout_s": 60, "threads_per_rank": 0,
            "device": "cpu", "backend": "gloo", "precision": "fp32"}
    return typed_trial(OmegaConf.merge(OmegaConf.structured(DdpbenchConfig), {
        "cluster": {**base, "name": "test", **cluster_keys}, "sweep_name": "s1", "seed": 1,
        "workload": {"name": "mlp", "script": "ddp_mlp.py"},
        "model": {"batch_size": 1, "input_dim": 1, "hidden_dim": 1, "hidden_layers": 1, "num_classes": 2,
                  "num_samples": 8, "lr": 0.1},
        "stop": {"kind": "steps", "steps": 3, "warmup_steps": 1},
        "trial": {"log_every": 0, "collective_timeout_s": 5, "save_step_times": False},
        "fault": {"crash_at_step": None, "hang_at_step": None, "clock_skew_sec": 0, "rank": None},
        "mode": {"name": "native", "command": ["{python}", "{script}", "{workload_args}"], "tool_args": [],
                 "env": {}, "workload_args": [], "summary_file": None},
    }))


def test_every_builtin_kind_is_registered() -> None:
    for kind in cluster.BUILTIN_KINDS:
        backend = cluster.backend_for(_cfg(kind=kind))
        assert backend.kind == kind and isinstance(backend, cluster.Backend)


def test_unknown_kind_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError, match=r"cluster.kind='pbs': must be local, ray, slurm, static") as error:
        cluster.backend_for(_cfg(kind="pbs")).validate(_cfg(kind="pbs"))
    assert "\n" not in str(error.value)


def test_static_backend_owns_its_rules_and_hooks() -> None:
    with pytest.raises(ConfigError, match="rendezvous_timeout_s"):
        static = _cfg(kind="static", rendezvous_timeout_s=5)
        cluster.backend_for(static).validate(static)
    cfg = _cfg(kind="static", shared_dir=False, node_rank=1)
    assert not cluster.backend_for(cfg).writes_report(cfg)
    assert all(cluster.backend_for(c).writes_report(c) for c in (_cfg(kind="static"), _cfg(kind="local")))
    context = commands.make_context(cfg, resolve_arm(cfg), node_rank=1, master_addr="a", master_port=1,
                                    aggregator_port=2, run_name="r-1", job_dir=Path("/tmp/j"))
    assert "--gather-metrics" in commands.workload_args(cfg, "/tmp/j/metrics")
    assert "--gather-metrics" not in commands.workload_args(_cfg(kind="static"), "/tmp/j/metrics")
    assert "--gather-metrics" not in commands.workload_args(_cfg(kind="local", shared_dir=False), "/tmp/j/metrics")
    env = commands.node_environment(cfg, resolve_arm(cfg), context, base={})
    assert env["PET_RDZV_ID"] == "r-1" and env["PET_RDZV_CONF"] == "timeout=60"
    local = _cfg(kind="local")
    assert "PET_RDZV_ID" not in commands.node_environment(local, resolve_arm(local), context, base={})


def test_a_backend_of_your_own_is_one_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_site_backend.py").write_text(CUSTOM_BACKEND.format(kind="my_site_backend"))
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = _cfg(kind="my_site_backend")
    cluster.backend_for(cfg).validate(cfg)
    job = JobInfo(job_dir=tmp_path, sweep_dir=tmp_path, job_num=4, overrides=[], choices={}, multirun=True)
    plan = cluster.backend_for(cfg).plan(cfg, job, 12.5)
    assert (plan.master_addr, plan.master_port, plan.run_token) == ("10.0.0.1", 1004, "12.5")
    arm = resolve_arm(cfg)
    context = commands.make_context(cfg, arm, node_rank=0, master_addr="a", master_port=1, aggregator_port=2,
                                    run_name="r-4", job_dir=tmp_path)
    assert commands.node_environment(cfg, arm, context, base={})["HERE_RUN"] == "r-4"
