"""Tests of the built-in workloads: transformer and convnet beside the MLP, both loaders,
both timing modes, memory in the rank record, natively and under ``traceml run``.

Real 2-rank gloo runs at model=tiny; the cases are combined so every workload runs natively with
the realistic loader and phase timing, and under TraceML once with the other loader or timing (the
MLP's synthetic/step TraceML runs are in test_workload_mlp.py). The stop rules, faults and injection are
the harness's, shared by every workload: the transformer and the convnet each run the lockstep
duration stop with a clock skew and an injected step cost. About 80 s on 2 cores.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig

from ddpbench.config import typed_trial, validate
from ddpbench.errors import ConfigError
from ddpbench.formats.rank_record import PHASES, STEP_STAT_KEYS, upgrade_rank_record, validate_rank_record
from ddpbench.formats.rank_record import SCHEMA_VERSION as RANK_SCHEMA_VERSION
from ddpbench.trial.command import WORKLOAD_DIR, workload_args
from helpers.cli import run_ddpbench
from helpers.processes import CompletedRun, assert_no_leftover, child_env, free_port, free_ports, run_bounded

TINY_COMMON = ["--batch-size", "8", "--num-samples", "256", "--log-every", "0"]
TINY_SIZES = {
    "mlp": ["--input-dim", "32", "--hidden-dim", "32", "--hidden-layers", "1", "--num-classes", "4"],
    "transformer": ["--d-model", "16", "--layers", "1", "--heads", "2", "--seq-len", "8", "--vocab", "64"],
    "convnet": ["--width", "4", "--blocks", "1", "--stages", "2", "--image-size", "8", "--num-classes", "4"],
}
SCRIPTS = {"mlp": "ddp_mlp.py", "transformer": "ddp_transformer.py", "convnet": "ddp_convnet.py"}
RUN_TIMEOUT_S = 90.0


def script_args(workload: str, extra: list[str]) -> list[str]:
    """The workload script by path with its tiny size and ``extra``."""
    return [str(WORKLOAD_DIR / SCRIPTS[workload]), *TINY_COMMON, *TINY_SIZES[workload], *extra]


def torchrun(workload: str, extra: list[str]) -> CompletedRun:
    """``workload`` under ``python -m torch.distributed.run`` (2 CPU ranks), tree killed on return."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), *script_args(workload, extra)]
    run = run_bounded(cmd, RUN_TIMEOUT_S, env=child_env())
    assert_no_leftover(run.procs)
    return run


def read_ranks(metrics_dir: Path) -> list[dict[str, Any]]:
    return [json.loads((metrics_dir / f"rank-{r}.json").read_text()) for r in range(2)]


def assert_phase_record(record: dict[str, Any], workload: str, loader: str) -> None:
    """A valid v2 record of ``workload`` with per-phase statistics that add up to the step and memory figures."""
    assert validate_rank_record(record) == [], validate_rank_record(record)
    assert record["schema_version"] == RANK_SCHEMA_VERSION and record["workload"] == workload and record["timing"] == "phase"
    assert record["data"]["loader"] == loader
    assert record["data"]["workers"] == (2 if loader == "realistic" else 0)
    phases = record["phase_time_ms"]
    assert set(phases) == set(PHASES) and all(set(phases[p]) == set(STEP_STAT_KEYS) for p in PHASES)
    for phase in ("data_wait", "forward", "backward", "optimizer"):
        assert phases[phase]["median"] > 0, (phase, phases[phase])
    # "other" is each step minus its timed phases, so the phase means add up to the step mean
    total = sum(phases[p]["mean"] for p in PHASES)
    assert total == pytest.approx(record["step_time_ms"]["mean"], rel=0.01), (total, record["step_time_ms"])
    assert phases["forward"]["median"] <= record["step_time_ms"]["median"]
    memory = record["memory"]
    assert 50e6 < memory["host_peak_rss_bytes"] < 16e9  # torch alone is ~200 MB
    assert memory["cuda_peak_allocated_bytes"] is None
    assert record["peak_memory_kind"] == "max_rss" and record["peak_memory_bytes"] == memory["host_peak_rss_bytes"]


# ----------------------------------------------------------------------------- config and command line


@pytest.fixture(scope="module")
def compose_cfg() -> Any:
    """``compose(overrides)`` of ddpbench's config, as the app composes it."""
    import ddpbench.app  # noqa: F401  (registers the configs and the paired sweeper, as the app does)

    with initialize_config_module(config_module="ddpbench.conf", version_base="1.3"):
        yield lambda overrides: typed_trial(compose(config_name="config", overrides=["sweep_name=t", *overrides]))


def test_mlp_is_the_default_workload_with_its_old_arguments(compose_cfg: Any) -> None:
    cfg: DictConfig = compose_cfg(["model=small"])
    validate(cfg)
    args = workload_args(cfg, "/m")
    assert cfg.workload.name == "mlp" and cfg.timing == "step" and cfg.data.loader == "synthetic"
    for flag in ("--input-dim=512", "--hidden-dim=512", "--hidden-layers=2", "--num-classes=10", "--batch-size=64"):
        assert flag in args, (flag, args)


@pytest.mark.parametrize("model", ["tiny", "small", "medium", "seed_e2e"])
def test_every_size_is_valid_for_every_workload(compose_cfg: Any, model: str) -> None:
    for workload in ("mlp", "transformer", "convnet"):
        cfg = compose_cfg([f"workload={workload}", f"model={model}", "cluster.nproc_per_node=1"])
        validate(cfg)
        assert (WORKLOAD_DIR / cfg.workload.script).is_file()


def test_transformer_gets_its_sizes_and_the_new_flags(compose_cfg: Any) -> None:
    cfg = compose_cfg(["workload=transformer", "model=tiny", "data.loader=realistic", "data.workers=3", "timing=phase"])
    validate(cfg)
    args = workload_args(cfg, "/m")
    for flag in ("--d-model=16", "--layers=1", "--heads=2", "--seq-len=8", "--vocab=64", "--loader=realistic",
                 "--loader-workers=3", "--timing=phase", "--batch-size=8"):
        assert flag in args, (flag, args)
    assert not any(a.startswith("--input-dim") for a in args)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.workers=0", "data.workers=0: must be >= 1"),
        ("model.transformer.heads=3", "model.transformer.d_model=16: must be a multiple of model.transformer.heads=3"),
        ("model.convnet.width=0", "model.convnet.width=0: must be >= 1"),
    ],
)
def test_bad_workload_config_is_one_line(compose_cfg: Any, override: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(compose_cfg([override]))
    assert str(info.value) == message


@pytest.mark.parametrize(("override", "message"), [
    ("data.loader=disk", "Invalid value 'disk', expected one of [synthetic, realistic]"),
    ("timing=kernel", "Invalid value 'kernel', expected one of [step, phase]"),
])
def test_a_closed_choice_outside_its_values_is_refused_while_composing(compose_cfg: Any, override: str,
                                                                       message: str) -> None:
    with pytest.raises(ConfigCompositionException) as info:
        compose_cfg([override])
    assert message in str(info.value.__cause__)


def test_bad_transformer_heads_exit_2_before_torch() -> None:
    code = ("import sys\nfrom ddpbench.workload import ddp_transformer\n"
            "try:\n    ddp_transformer.main(['--steps', '2', '--d-model', '10', '--heads', '4'])\n"
            "finally:\n    assert 'torch' not in sys.modules\n")
    run = run_bounded([sys.executable, "-c", code], 30.0, env=child_env())
    assert run.returncode == 2, run.output
    assert run.stderr.strip() == ("ddp_transformer: error: --d-model 10 is not a multiple of --heads 4 (see --help)")


def test_version_1_records_still_validate_and_upgrade() -> None:
    v1 = json.loads((Path(__file__).parent / "data" / "rank-v1.json").read_text())
    assert validate_rank_record(v1) == []
    upgraded = upgrade_rank_record(v1)
    assert upgraded["workload"] == "mlp" and upgraded["timing"] == "step" and upgraded["phase_time_ms"] is None
    assert upgraded["memory"] == {"host_peak_rss_bytes": v1["peak_memory_bytes"], "cuda_peak_allocated_bytes": None}
    broken = dict(v1, schema_version=2)  # a version 2 record must carry the new fields
    assert any("workload: missing" in p for p in validate_rank_record(broken))


# ----------------------------------------------------------------------------- native runs


@pytest.mark.slow
def test_mlp_realistic_loader_with_phase_timing(tmp_path: Path) -> None:
    run = torchrun("mlp", ["--steps", "12", "--warmup-steps", "2", "--loader", "realistic", "--timing", "phase",
                           "--metrics-dir", str(tmp_path)])
    assert run.returncode == 0, run.output
    for record in read_ranks(tmp_path):
        assert_phase_record(record, "mlp", "realistic")
        assert record["timed_steps"] == 12


@pytest.mark.slow
def test_convnet_through_ddpbench_realistic_phase(tmp_path: Path) -> None:
    """The whole chain: workload group -> trial command -> script by path -> rank records -> trial.json."""
    run = run_ddpbench(["workload=convnet", "model=tiny", "data.loader=realistic", "timing=phase", "stop.steps=12",
                        "stop.warmup_steps=2", "sweep_name=conv"], tmp_path, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.output
    job = tmp_path / "outputs" / "runs" / "conv"
    assert json.loads((job / "trial.json").read_text())["status"] == "ok"
    for record in read_ranks(job / "attempts" / "1" / "metrics"):
        assert_phase_record(record, "convnet", "realistic")
        assert record["args"]["width"] == 4 and record["args"]["stages"] == 1


# ----------------------------------------------------------------------------- under traceml run


@pytest.mark.slow
@pytest.mark.parametrize(("workload", "loader", "timing"),
                         [("transformer", "realistic", "phase"), ("convnet", "synthetic", "step")])
def test_under_traceml_every_step_is_traced_and_the_ranks_stop_together(workload: str, loader: str, timing: str,
                                                                         tmp_path: Path) -> None:
    """Under ``traceml run`` (auto mode, which patches the data loader) every step is traced, with 5 ms injected
    in each; rank 1's clock runs 1.5 s ahead of a 2.5 s duration, and both ranks still stop after the same check
    step, on rank 1's clock."""
    master, aggregator = free_ports(2)
    logs, metrics = tmp_path / "traceml", tmp_path / "metrics"
    cmd = [sys.executable, "-m", "traceml_ai.launcher.cli", "run", str(WORKLOAD_DIR / SCRIPTS[workload]),
           "--mode=summary", "--logs-dir", str(logs), "--run-name", f"wl-{workload}", "--nproc-per-node", "2",
           "--master-port", str(master), "--aggregator-port", str(aggregator),
           "--args", *script_args(workload, ["--duration-sec", "2.5", "--fault-clock-skew-sec", "1.5",
                                             "--fault-rank", "1", "--stop-check-every", "4", "--warmup-steps", "2",
                                             "--inject-step-ms", "5", "--loader", loader, "--timing", timing,
                                             "--metrics-dir", str(metrics)])[1:]]
    run = run_bounded(cmd, 120.0, env=child_env())
    assert_no_leftover(run.procs)
    assert run.returncode == 0, run.output
    r0, r1 = read_ranks(metrics)
    assert r0["timed_steps"] == r1["timed_steps"] > 0 and r0["timed_steps"] % 4 == 0
    assert r0["stop_reason"] == r1["stop_reason"] == "duration"
    assert r0["train_s"] < 2.5  # stopped on rank 1's clock (about 1 s), before rank 0's own would end it
    for record in (r0, r1):
        assert record["traceml"] == {"active": True, "mode": "auto"} and record["data"]["loader"] == loader
        # the injected wait is inside every timed step; a late wake-up is paid back by the next steps,
        # so the waits average 5 ms while one step may be shorter
        assert record["step_time_ms"]["mean"] >= 5.0
        if timing == "phase":
            assert_phase_record(record, workload, loader)
            assert record["phase_time_ms"]["other"]["mean"] >= 4.5  # ... outside the timed phases
        else:
            assert validate_rank_record(record) == [] and record["workload"] == workload
            assert record["timing"] == "step" and record["phase_time_ms"] is None
    summary = json.loads((logs / f"wl-{workload}" / "final_summary.json").read_text())
    assert summary["step_time"]["global"]["window"]["steps_analyzed"] == r0["timed_steps"] + 2
