"""Framework jobs, unmodified: an HF Trainer script and a Lightning script under ddpbench, native and traceml.

ddpbench attaches its recorder to the scripts' Trainers from outside (tests/scripts/hf_trainer_script.py and
lightning_script.py hold nothing of ddpbench): per-step figures, the optimizer steps ddpbench sets, the
lockstep duration stop under a clock skew, TraceML attached by ``traceml run`` and by its explicit callback,
a failing Trainer, a missing framework.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from hydra import compose, initialize_config_module

from ddpbench.config import typed_trial
from ddpbench.errors import ConfigError
from ddpbench.trial.command import make_context, node_environment
from ddpbench.versions.arm import resolve_arm
from ddpbench.trial.checks import check_trial_config
from ddpbench.workload.frameworks import ENV_HOOK, SITE_HOOK_DIR
from ddpbench.workload.recorder import ENV_METRICS_DIR, ENV_STOP_STEPS
from helpers.cli import CliRun, only_sweep_dir, run_ddpbench, trials_in

SCRIPTS = Path(__file__).parent / "scripts"
HF_SCRIPT = SCRIPTS / "hf_trainer_script.py"
PL_SCRIPT = SCRIPTS / "lightning_script.py"
PLAIN_SCRIPT = SCRIPTS / "ddp_user_script.py"


def rank_records(trial: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(Path(trial["attempt"]["dir"]).glob("metrics/rank-*.json"))]


def sweep(cwd: Path, *overrides: str) -> CliRun:
    return run_ddpbench(["-m", "workload=script", *overrides], cwd, timeout=400)


# --- pure parts ---


@pytest.fixture()
def compose_cfg() -> Iterator[Any]:
    from ddpbench.config import register_configs

    register_configs()

    with initialize_config_module(config_module="ddpbench.conf", version_base=None):
        yield lambda overrides: typed_trial(compose(config_name="config", overrides=[*overrides, "sweep_name=t"]))


def environment(cfg: Any, tmp_path: Path) -> Dict[str, str]:
    arm = resolve_arm(cfg)
    context = make_context(cfg, arm, node_rank=0, master_addr="127.0.0.1", master_port=1, aggregator_port=2,
                           run_name="r", job_dir=tmp_path)
    return node_environment(cfg, arm, context, base={"PYTHONPATH": "/user/path"})


def test_a_framework_script_gets_the_hook_and_the_steps_by_default(compose_cfg: Any, tmp_path: Path) -> None:
    env = environment(compose_cfg(["workload=script", f"workload.path={HF_SCRIPT}", "stop.steps=7"]), tmp_path)
    assert env["PYTHONPATH"].split(":") == [str(SITE_HOOK_DIR), "/user/path"]
    assert (SITE_HOOK_DIR / "sitecustomize.py").is_file()
    assert env[ENV_HOOK] == "1" and env[ENV_STOP_STEPS] == "7" and env[ENV_METRICS_DIR].endswith("metrics")
    own = environment(compose_cfg(["workload=script", f"workload.path={PL_SCRIPT}", "stop.from_script=true"]), tmp_path)
    assert ENV_STOP_STEPS not in own and own[ENV_HOOK] == "1"  # the script's own max_steps


@pytest.mark.parametrize("overrides", [
    [f"workload.path={HF_SCRIPT}", "workload.records=false"],
    [f"workload.path={PLAIN_SCRIPT}"],
])
def test_no_hook_without_records_or_framework(compose_cfg: Any, tmp_path: Path, overrides: List[str]) -> None:
    env = environment(compose_cfg(["workload=script", *overrides]), tmp_path)
    assert env["PYTHONPATH"] == "/user/path" and ENV_HOOK not in env and ENV_METRICS_DIR not in env


@pytest.mark.parametrize("overrides, message", [
    ([f"workload.path={PLAIN_SCRIPT}", "stop.from_script=true"], "stop.from_script=true: keeps a framework Trainer's"),
    (["workload=mlp", "stop.from_script=true"], "stop.from_script=true: keeps a framework Trainer's"),
    (["workload=hf_trainer", "timing=phase"], "workload=hf_trainer with timing='phase': the Trainer's step is the"),
    (["workload=lightning", "fault.crash_at_step=3"], "workload=lightning with fault.crash_at_step=3: only the clock skew"),
    (["workload=mlp", "mode=wandb_framework"], "mode=wandb_framework: attaches its tool to a framework Trainer"),
    ([f"workload.path={PLAIN_SCRIPT}", "mode=traceml_callback"], "mode=traceml_callback: attaches its tool to a"),
    ([f"workload.path={HF_SCRIPT}", "workload.records=false", "fault.clock_skew_sec=5"],
     "fault.clock_skew_sec=5.0: fault injection needs a built-in workload or ddpbench's recorder"),
])
def test_framework_refusals_are_one_line(compose_cfg: Any, overrides: List[str], message: str) -> None:
    script = ["workload=script"] if overrides[0].startswith("workload.path") else []
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        check_trial_config(compose_cfg(script + overrides))
    assert "\n" not in str(caught.value)


def test_a_missing_framework_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(  # an environment without lightning
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'lightning':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Hide())\n")
    run = run_ddpbench(["workload=script", f"workload.path={PL_SCRIPT}"], tmp_path, timeout=120,
                       env={"PYTHONPATH": str(hide)})
    assert run.returncode != 0, run.output
    errors = [line for line in run.stderr.splitlines() if "error" in line]
    assert errors == [f"ddpbench: error: workload.path='{PL_SCRIPT}': the script imports lightning, which is not "
                      "installed (pip install lightning, or ddpbench[frameworks])"], run.output
    assert not list(tmp_path.glob("outputs/**/trial.json"))


ORDER_CHECK = """
import sys
from traceml_ai.runtime import hf_auto
from ddpbench.workload.frameworks import attach
if sys.argv[1] == "traceml-first":
    hf_auto.install(); attach.install()
else:
    attach.install(); hf_auto.install()
assert "transformers.trainer_callback" not in sys.modules
import transformers.trainer as trainer
from traceml_ai.integrations import huggingface
handler = trainer.CallbackHandler.__init__
assert getattr(handler, "_ddpbench_hooked", False), "ddpbench's callback not attached"
assert huggingface._AUTO_ATTACH_ENABLED, "TraceML's auto attach not enabled"
print("both attached")
"""


@pytest.mark.slow
@pytest.mark.parametrize("order", ["traceml-first", "ddpbench-first"])
def test_traceml_and_ddpbench_hooks_attach_in_either_order(tmp_path: Path, order: str) -> None:
    environ = {**os.environ, ENV_METRICS_DIR: str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", ORDER_CHECK, order], env=environ, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0 and "both attached" in done.stdout, done.stderr[-2000:]


# --- real 2-rank jobs ---


@pytest.mark.slow
def test_hf_trainer_native_and_traceml_time_the_steps_ddpbench_sets(tmp_path: Path) -> None:
    run = sweep(tmp_path, "mode=native,traceml", f"workload.path={HF_SCRIPT}", 'workload.args=["--max-steps=3"]',
                "stop.steps=6", "stop.warmup_steps=2", "trial.save_step_times=true")
    assert run.returncode == 0, run.output
    trials = trials_in(only_sweep_dir(tmp_path))
    assert sorted(t["mode"] for t in trials) == ["native", "traceml"]
    for trial in trials:
        assert trial["status"] == "ok" and trial["steps"] == 6, trial
        assert trial["step_time_ms"]["median"] > 0 and trial["train_s"] > 0 and trial["startup_s"] > 0
        records = rank_records(trial)
        assert [r["timed_steps"] for r in records] == [6, 6]  # the script's own max_steps=3 was overridden
        assert all(len(r["step_times_ms"]) == 6 and r["memory"]["host_peak_rss_bytes"] > 0 for r in records)
        assert all(r["samples"] == 6 * 4 for r in records)
    traceml = next(t for t in trials if t["mode"] == "traceml")
    assert traceml["traceml"]["steps_analyzed"] == 2 + 6  # TraceML attached itself to the same Trainer
    assert "traceml run" in traceml["config"]["mode"]["attach"]
    report = (only_sweep_dir(tmp_path) / "report.md").read_text()
    assert "mode.attach" in report


@pytest.mark.slow
def test_lightning_duration_stop_ends_every_rank_on_the_same_step_under_skew(tmp_path: Path) -> None:
    run = sweep(tmp_path, "mode=native,traceml_callback", f"workload.path={PL_SCRIPT}", 'workload.args=["--grad-accum=2"]',
                "stop=duration", "stop.duration_sec=60", "stop.check_every=4", "stop.warmup_steps=2",
                "fault.clock_skew_sec=1000", "fault.rank=1")
    assert run.returncode == 0, run.output
    trials = trials_in(only_sweep_dir(tmp_path))
    for trial in trials:
        assert trial["status"] == "ok", trial
        records = rank_records(trial)
        # rank 1's clock expired at once: both ranks stop after the first check, on the same optimizer step
        assert [(r["timed_steps"], r["stop_reason"]) for r in records] == [(4, "duration")] * 2, records
        assert all(r["samples"] == 4 * 8 * 2 for r in records)  # one step = one optimizer step of 2 micro-batches
    callback = next(t for t in trials if t["mode"] == "traceml_callback")
    assert callback["traceml"]["steps_analyzed"] == 2 + 4


@pytest.mark.slow
def test_a_failing_trainer_fails_its_trial_and_the_sweep_goes_on(tmp_path: Path) -> None:
    run = sweep(tmp_path, "mode=native", f"workload.path={PL_SCRIPT}", "workload.records=false",
                'workload.args=["--crash-at-step=1"],["--max-steps=4","--end-process-group"]')
    assert run.returncode != 0, run.output
    failed, ok = sorted(trials_in(only_sweep_dir(tmp_path)), key=lambda t: t["status"])
    assert failed["status"] == "failed" and "user script crashed at step 1" in failed["error"], failed
    assert ok["status"] == "ok" and not rank_records(ok), ok  # records off: wall-time figures only
    assert "Warning" not in run.stderr, run.stderr  # the report's plots skip the missing per-step data
    assert (only_sweep_dir(tmp_path) / "report.md").is_file()


@pytest.mark.slow
def test_builtin_lightning_workload_native_and_traceml(tmp_path: Path) -> None:
    run = run_ddpbench(["-m", "mode=native,traceml", "workload=lightning", "model=tiny", "stop.steps=5",
                        "stop.warmup_steps=2"], tmp_path, timeout=400)
    assert run.returncode == 0, run.output
    trials = trials_in(only_sweep_dir(tmp_path))
    assert [(t["status"], t["steps"]) for t in trials] == [("ok", 5)] * 2, trials
    for trial in trials:
        assert [(r["workload"], r["timed_steps"], r["samples"]) for r in rank_records(trial)] == [("lightning", 5, 5 * 8)] * 2
    assert next(t for t in trials if t["mode"] == "traceml")["traceml"]["steps_analyzed"] == 2 + 5
