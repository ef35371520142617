"""The rank's command line has one schema (``ddpbench.workload.args.RankArgs``): for every built-in workload and
every shipped mode that can run it, what the trial renders for a config, the rank parses back into that config's
values. In-process, no torch: the rank parses its arguments before it imports torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
from hydra import compose, initialize_config_module

from ddpbench.config import DdpbenchConfig, typed_trial
from ddpbench.trial.command import workload_args
from ddpbench.workload.args import RankArgs, parse_args
from ddpbench.workload.ddp_convnet import ConvNet
from ddpbench.workload.ddp_mlp import MLP
from ddpbench.workload.ddp_transformer import Transformer
from ddpbench.workload.frameworks import ENV_TOOL, ENV_TRACEML_CALLBACK

CONF = Path(__file__).resolve().parent.parent / "conf"
#: every shipped mode
MODES = sorted(path.stem for path in (CONF / "mode").glob("*.yaml"))
#: the built-in workloads whose rank parses the harness's arguments, and their classes
WORKLOADS = {"mlp": MLP, "transformer": Transformer, "convnet": ConvNet}


@pytest.fixture(scope="module")
def compose_cfg() -> Iterator[Any]:
    """``compose(overrides)`` of ddpbench's config, as the app composes it."""
    import ddpbench.app  # noqa: F401  (registers the configs, as the app does)

    with initialize_config_module(config_module="ddpbench.conf", version_base="1.3"):
        yield lambda overrides: typed_trial(compose(config_name="config", overrides=["sweep_name=t", *overrides]))


def sizes_of(cfg: DdpbenchConfig) -> Dict[str, Any]:
    """The size arguments the config gives its workload, as the rank's field names."""
    m = cfg.model
    if cfg.workload.name == "transformer":
        t = m.transformer
        return {"d_model": t.d_model, "layers": t.layers, "heads": t.heads, "seq_len": t.seq_len, "vocab": t.vocab}
    if cfg.workload.name == "convnet":
        c = m.convnet
        return {"width": c.width, "blocks": c.blocks, "stages": c.stages, "image_size": c.image_size,
                "channels": c.channels, "num_classes": m.num_classes}
    return {"input_dim": m.input_dim, "hidden_dim": m.hidden_dim, "hidden_layers": m.hidden_layers,
            "num_classes": m.num_classes}


def expected(cfg: DdpbenchConfig, metrics_dir: str) -> Dict[str, Any]:
    """What each rank argument must be for ``cfg``, read from the config key by key."""
    stop, tool, switch = cfg.stop, cfg.tool, cfg.mode.switch
    mode_args = " ".join(str(a) for a in cfg.mode.workload_args)
    switching = cfg.switching.kind != "none" and switch is not None
    profiling = "--torch-profiler=" in mode_args
    return {
        "steps": stop.steps if stop.kind == "steps" else None,
        "duration_sec": stop.duration_sec if stop.kind == "duration" else None,
        "warmup_steps": stop.warmup_steps, "no_sync_stop": not stop.sync,
        "batch_size": cfg.model.batch_size, "num_samples": cfg.model.num_samples, "lr": cfg.model.lr, "seed": cfg.seed,
        "loader": cfg.data.loader, "loader_workers": cfg.data.workers, "prefetch_factor": cfg.data.prefetch_factor,
        "timing": cfg.timing, "host_sync": cfg.workload.host_sync, "gc": cfg.workload.gc,
        "device": cfg.cluster.device, "backend": cfg.cluster.backend, "precision": cfg.cluster.precision,
        "collective_timeout_sec": cfg.trial.collective_timeout_s, "log_every": cfg.trial.log_every,
        "metrics_dir": metrics_dir, "save_step_times": cfg.trial.save_step_times,
        "fault_rank": cfg.fault.rank, "fault_crash_at_step": cfg.fault.crash_at_step,
        "fault_hang_at_step": cfg.fault.hang_at_step, "fault_clock_skew_sec": cfg.fault.clock_skew_sec,
        "inject_step_ms": cfg.inject.step_ms if "--inject-step-ms" in mode_args else 0.0,
        "inject_startup_sec": cfg.inject.startup_s if "--inject-startup-sec" in mode_args else 0.0,
        "inject_teardown_sec": cfg.inject.teardown_s if "--inject-teardown-sec" in mode_args else 0.0,
        "inject_device_step_ms": cfg.inject.device_step_ms if "--inject-device-step-ms" in mode_args else 0.0,
        "torch_profiler": (tool.torch_profiler.wait, tool.torch_profiler.warmup, tool.torch_profiler.active,
                           tool.torch_profiler.repeat) if profiling else None,
        "torch_profiler_handler": tool.torch_profiler.handler,
        "wandb": "--wandb" in cfg.mode.workload_args,
        "wandb_project": tool.wandb.project,
        "switch": switch.what if switching else "none",
        "switch_block_steps": cfg.switching.block_steps if switching else 0,
        "switch_washout_steps": cfg.switching.washout_steps if switching else 0,
    }


def runs_builtin(cfg: DdpbenchConfig) -> bool:
    """Whether the mode runs a built-in workload (a mode that attaches its tool to a framework Trainer does not)."""
    return not {ENV_TOOL, ENV_TRACEML_CALLBACK} & set(cfg.mode.env)


@pytest.mark.parametrize("mode", MODES)
def test_what_the_trial_renders_parses_back_to_the_config(compose_cfg: Any, mode: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("DDPBENCH_TOOL_DIR", "/tools")  # a mode's env gives its tools their folder
    cluster = ["cluster=gpu_single"] if mode == "inject_device" else []  # a device-side wait needs a GPU
    checked = 0
    for name, workload in WORKLOADS.items():
        cfg = compose_cfg([f"workload={name}", f"mode={mode}", *cluster, "trial.save_step_times=true",
                           "fault.clock_skew_sec=0.25"])
        if not runs_builtin(cfg):
            continue
        args: RankArgs[Any] = parse_args(workload(), workload_args(cfg, "/m"))
        got = {key: getattr(args, key) for key in expected(cfg, "/m")}
        assert got == expected(cfg, "/m"), (name, mode)
        assert {key: getattr(args.sizes, key) for key in sizes_of(cfg)} == sizes_of(cfg), (name, mode)
        record = json.loads(json.dumps(args.as_dict()))  # the rank record's args: one flat mapping, sizes among them
        wanted = json.loads(json.dumps({**got, **sizes_of(cfg)}))
        assert {key: record[key] for key in wanted} == wanted, (name, mode)
        checked += 1
    assert checked == (0 if mode.endswith("_framework") or mode == "traceml_callback" else len(WORKLOADS))
