"""scripts/device-check.sh: the wheel set for the GPU machine, its install, and the run path on CPU.

Real parts: `prepare` downloads from PyPI and builds ddpbench's wheel from this checkout; the
install goes into a fresh target dir put first on the path of the interpreter under test
(sys.executable: its torch and msgspec, which the set leaves to the image), so the wheels answer
the imports before the environment's own copies, and the probe checks where each came from; the
selftest runs real sweeps (torchrun, traceml run) through the same code path as `run` on the GPU machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from helpers.processes import child_env, run_bounded
from helpers.trials import make_sweep, step_summary

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "device-check.sh"
HELPER = REPO / "scripts" / "device_check.py"
REPORTER = REPO / "scripts" / "device_report.py"
EXPECTED = {"ddpbench", "hydra-core", "omegaconf", "antlr4-python3-runtime", "submitit",
            "hydra-submitit-launcher", "traceml-ai", "msgspec"}
#: Hydra's plugin scan of a non-editable install failing in dataclasses (a plugin module with postponed annotations)
PLUGIN_SCAN_BUG = "'NoneType' object has no attribute '__dict__'"


def _wheel_name(path: Path) -> str:
    return path.name.split("-")[0].replace("_", "-").lower()


@pytest.fixture(scope="module")
def wheel_dir(tmp_path_factory) -> Path:
    """`device-check.sh prepare` into a fresh folder (downloads from PyPI, ~10 s)."""
    target = tmp_path_factory.mktemp("prep") / "whl"
    proc = subprocess.run(["bash", str(SCRIPT), "prepare"], capture_output=True, text=True, timeout=300,
                          env=child_env({"PYTHON": sys.executable, "WHEEL_DIR": str(target)}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "complete and consistent" in proc.stdout
    return target


@pytest.mark.slow
def test_prepare_gives_a_complete_consistent_set_under_the_size_limit(wheel_dir, tmp_path):
    wheels = sorted(wheel_dir.glob("*.whl"))
    names = [_wheel_name(w) for w in wheels]
    assert sorted(names) == sorted(EXPECTED)  # one version of each, nothing else (no torch)
    assert sum(w.stat().st_size for w in wheels) < 32 * 2**20
    source = (wheel_dir / "SOURCE.txt").read_text()
    assert "checkout " in source and "prepared " in source
    # ddpbench's wheel carries every module and config of the checkout
    with zipfile.ZipFile(next(w for w in wheels if w.name.startswith("ddpbench-"))) as zf:
        held = set(zf.namelist())
    assert {"ddpbench/analysis/flops.py", "ddpbench/formats/rank_record.py", "ddpbench/conf/cluster/gpu_single.yaml",
            "hydra_plugins/ddpbench_sweeper/paired_sweeper.py"} <= held

    # `run` (the device's path) installs all or nothing: here, on another Python, it stops at once.
    if sys.version_info[:2] != (3, 12):
        proc = subprocess.run(["bash", str(SCRIPT), "run"], capture_output=True, text=True, timeout=60,
                              env=child_env({"PYTHON": sys.executable, "WHEEL_DIR": str(wheel_dir),
                                             "WORK_DIR": str(tmp_path / "work")}))
        assert proc.returncode == 2
        assert proc.stderr.strip().startswith("device-check: error: msgspec-0.23.0-cp312"), proc.stderr
        assert "does not install on this Python" in proc.stderr

    # The check itself fails a broken set: a second version, a missing dependency, torch carried.
    broken = tmp_path / "broken"
    shutil.copytree(wheel_dir, broken)
    shutil.copy(broken / next(w.name for w in wheels if w.name.startswith("hydra_core-")),
                broken / "hydra_core-1.3.7-py3-none-any.whl")
    next(broken.glob("omegaconf-*.whl")).unlink()
    with zipfile.ZipFile(broken / "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", "w") as zf:
        zf.writestr("torch-2.11.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
    proc = subprocess.run([sys.executable, str(HELPER), "check", str(broken), str(REPO)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "two versions of hydra-core" in proc.stderr
    assert "missing: omegaconf" in proc.stderr
    assert "needs omegaconf" in proc.stderr
    assert "the image has torch" in proc.stderr


@pytest.mark.slow
def test_pure_wheels_install_into_a_fresh_target_and_import_from_there(wheel_dir, tmp_path):
    site = tmp_path / "site"
    listed = subprocess.run([sys.executable, str(HELPER), "installable", str(wheel_dir)],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    pure = listed.stdout.split()
    assert {_wheel_name(Path(p)) for p in pure} == EXPECTED - {"msgspec"}  # msgspec's wheel is for CPython 3.12
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--target", str(site), *pure], check=True, capture_output=True, timeout=120)
    env = child_env({"PYTHONPATH": str(site)})
    probe = (
        "import os, sys, antlr4, hydra, omegaconf, submitit, hydra_plugins.hydra_submitit_launcher\n"
        "import hydra_plugins.ddpbench_sweeper, ddpbench, traceml_ai\n"
        "mods = [antlr4, hydra, omegaconf, submitit, hydra_plugins.hydra_submitit_launcher,\n"
        "        hydra_plugins.ddpbench_sweeper, ddpbench, traceml_ai]\n"
        "print([m.__name__ for m in mods if not os.path.realpath(m.__file__).startswith(sys.argv[1])])\n"
        "from hydra.core.plugins import Plugins\n"
        "from hydra.plugins.sweeper import Sweeper\n"
        "print(sorted(p.__name__ for p in Plugins.instance().discover(Sweeper)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe, os.path.realpath(site)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert PLUGIN_SCAN_BUG not in proc.stderr, (
        "Hydra's plugin scan breaks on a non-editable install of ddpbench:\n" + proc.stderr[-2000:])
    assert proc.returncode == 0, proc.stderr
    outside, sweepers = proc.stdout.strip().splitlines()
    assert outside == "[]", f"imported from outside the target dir: {outside}"
    assert "PairedSweeper" in sweepers
    # The app composes its config from the wheel's conf (ddpbench.conf), not from this checkout.
    cfg = subprocess.run([sys.executable, "-m", "ddpbench", "--cfg", "job", "cluster=gpu_single", "cluster.precision=bf16"],
                         capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert cfg.returncode == 0, cfg.stderr[-2000:]
    assert "name: gpu_single" in cfg.stdout and "precision: bf16" in cfg.stdout


@pytest.mark.slow
def test_selftest_runs_the_bounded_run_path_on_cpu(wheel_dir, tmp_path):
    """The `run` path on CPU: the reference in the seed loop (TraceML against native), the clock's line, the
    calibration overrunning its bound (the others still run), the device-side wait refused in one line, the
    within-trial sweep; each with its summary line (where the step lands, start-up parts)."""
    work, out = tmp_path / "work", tmp_path / "out"
    env = child_env({"PYTHON": sys.executable, "WHEEL_DIR": str(wheel_dir), "WORK_DIR": str(work), "OUT": str(out),
                     "CAL_SEC": "120", "CAL_CAP_S": "12", "PYTHONUNBUFFERED": "1", "HF_PAIRS": "0",
                     # fixed bounds for the sweeps that must finish on a loaded machine (the plan fits a GPU run)
                     "REF_CAP_S": "240", "BLOCKS_CAP_S": "240", "BUDGET_S": "540"})
    env.pop("PYTHONPATH", None)
    run = run_bounded(["bash", str(SCRIPT), "selftest"], timeout=600, env=env, cwd=tmp_path, poll_s=0.5)
    text = run.output
    assert PLUGIN_SCAN_BUG not in text, "Hydra's plugin scan breaks on the wheel install"
    assert run.returncode == 1, text[-4000:]  # a sweep hit its bound: the run says so
    lines = (out / "summary.txt").read_text().splitlines()
    assert [line.split()[1] for line in lines] == ["ref", "gpu-clock", "cal", "calibration", "blocks", "hf"], lines
    ref, clock, cal, device, blocks, hf = lines
    assert "[ok] 2/2 trials ok, no GPU, host_sync=seed" in ref and "traceml vs native (n=1, duration)" in ref, ref
    assert "where, ms/step: native host" in ref and "(no GPU split on CPU)" in ref and "start-up: native" in ref
    assert "ms/step" in ref and "TFLOP/s" in ref
    assert "[ok] no CUDA device here" in clock, clock
    assert "[stopped at its 12s bound]" in cal, cal
    assert "[not applicable on CPU] refused in one line: mode=inject_device:" in device, device
    assert "[ok] 2/2 trials ok" in blocks and "within-trial" in blocks and "no-op switch (native)" in blocks, blocks
    assert "[not asked (0 pairs)]" in hf, hf
    for line in lines:  # the summary lines are also in the output (the device tool's output_tail)
        assert line in run.stdout
    with tarfile.open(out / "device-check.tar.gz") as tar:
        names = set(tar.getnames())
    for sweep in ("ref", "blocks"):
        for name in ("report.md", "analysis.json", "results.csv"):
            assert f"./outputs/multirun/{sweep}/{name}" in names
        assert any(n.startswith(f"./outputs/multirun/{sweep}/plots/") and n.endswith(".png") for n in names)
        assert any(n.startswith(f"./outputs/multirun/{sweep}/") and n.endswith("rank-0.json") for n in names)
    assert {"./combined/report.md", "./summary.txt", "./environment.txt", "./ref.log", "./cal.log"} <= names
    analysis = json.loads((work / "outputs/multirun/ref/analysis.json").read_text())
    assert analysis["n_ok"] == 2
    report = (work / "outputs/multirun/ref/report.md").read_text()
    assert "Training loop: `host_sync=seed`" in report and "Start-up by part, s per trial" in report
    assert not (work / "site" / "torch").exists()  # torch stays the interpreter's own


def test_bad_input_is_one_line(tmp_path):
    proc = subprocess.run(["bash", str(SCRIPT), "launch"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr.strip() == "device-check: error: usage: scripts/device-check.sh prepare|run|selftest"
    proc = subprocess.run([sys.executable, str(HELPER), "check", str(tmp_path / "none"), str(REPO)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr.startswith("device-check: error: no wheel folder")
    (tmp_path / "w").mkdir()
    proc = subprocess.run(["bash", str(SCRIPT), "selftest"], capture_output=True, text=True, timeout=30,
                          env=child_env({"WHEEL_DIR": str(tmp_path / "w"), "WORK_DIR": str(tmp_path / "work"),
                                         "REF_PAIRS": "two"}))
    assert proc.returncode == 2 and proc.stderr.strip() == "device-check: error: REF_PAIRS must be a whole number, got 'two'"
    (tmp_path / "w" / "notes.md").write_text("mine")  # prepare never replaces a folder holding more than wheels
    proc = subprocess.run(["bash", str(SCRIPT), "prepare"], capture_output=True, text=True, timeout=30,
                          env=child_env({"WHEEL_DIR": str(tmp_path / "w")}))
    assert proc.returncode == 2 and "holds more than wheels" in proc.stderr
    assert (tmp_path / "w" / "notes.md").read_text() == "mine"


def _reporter():
    """scripts/device_report.py as a module (it is a script, not part of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("device_report", REPORTER)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["device_report"] = module
    spec.loader.exec_module(module)
    return module


def test_the_plan_sizes_each_sweep_to_the_time_left_in_order_of_priority(tmp_path):
    """The first sweep gets its asked size when the later sweeps' smallest sizes still fit, shrinks (seconds first,
    then pairs) when not, takes its smallest size past the reserve, and is skipped only when even that does not fit;
    overheads measured by earlier sweeps replace the assumptions."""
    r = _reporter()
    specs = [r.parse_spec(t) for t in ("ref:3:6:3:native+traceml", "cal:1:4:2:native+native_aa+inject+inject_device",
                                       "hf:1:3:2:native+traceml:hf")]
    assert specs[2].framework and specs[1].modes == ("native", "native_aa", "inject", "inject_device")
    # assumed: native 12 s, tool 22 s, hf +6 s, inject +1.5 s; a sweep 10 s; a trial's gap 1 s
    ref = r.cost(specs[0], 3, 6, "gpu", {})
    assert ref == pytest.approx(10 + 3 * ((12 + 6 + 1) + (22 + 6 + 1)))
    reserve = r.cost(specs[1], 1, 2, "gpu", {}) + r.cost(specs[2], 1, 2, "gpu", {})
    assert r.plan_next(specs, ref + reserve, "gpu", {})[:2] == (3, 6)
    assert r.plan_next(specs, ref + reserve - 1, "gpu", {})[:2] == (3, 5)  # seconds shrink first
    pairs, sec, cap, why = r.plan_next(specs, 150, "gpu", {})  # past the reserve: the smallest size that fits
    assert (sec, why) == (3, "") and pairs == 3 and cap <= 150
    assert r.plan_next(specs, 30, "gpu", {})[3].startswith("skipped: 30s left")
    assert r.plan_next([r.parse_spec("ref:0:6:3:native")], 500, "gpu", {})[3] == "not asked (0 pairs)"
    # measured: a slow machine's native trials (24 s beyond their timed seconds) scale every assumption
    sweep = tmp_path / "multirun" / "ref"
    sweep.mkdir(parents=True)
    (sweep / "results.csv").write_text("mode,status,wall_s,train_s,workload\nnative,ok,30,6,mlp\nnative,ok,31,7,mlp\n")
    measured = r.measured_overheads(tmp_path / "multirun")
    assert measured == {("native", False): 24.0}
    assert r.overhead("traceml", True, "gpu", measured) == pytest.approx((22 + 6) * 2)
    (tmp_path / "timings").mkdir()
    (tmp_path / "timings" / "ref").write_text("100\n")  # 100 s for 61 s of trials: 37 s of its own
    assert r.measured_sweep_s(tmp_path / "multirun", tmp_path / "timings") == pytest.approx(100 - 61 - 2)
    for bad in ("ref:3:6", "ref:3:2:3:native", "ref:x:6:3:native", "ref:3:6:3:"):
        with pytest.raises(r.ReportError):
            r.parse_spec(bad)


def test_the_summary_line_gives_where_the_cost_lands_and_the_calibration_by_side(tmp_path):
    """A GPU-shaped sweep (the seed loop, the GPU split per step, a device-side calibration): its summary line
    says the per-step interval against the 1 % goal, host / GPU-busy / GPU-idle per mode, the calibration's side."""
    from ddpbench.report import write_report

    def figures(mode, repeat):
        busy, idle, step = {"native": (3.0, 2.0, 5.0), "traceml": (3.1, 3.5, 6.6),
                            "inject_device": (5.0, 2.0, 7.0)}[mode]
        step += 0.01 * repeat + (0.1 * (repeat % 3) - 0.1 if mode == "traceml" else 0.0)  # Δ 1.6, 1.7, 1.5 ms
        return {"step_ms": step, "host_sync": "seed",
                "gpu_time_ms": {"busy": step_summary(busy), "idle": step_summary(idle), "late_reads": 0},
                "environment": {"gpu_names": ["NVIDIA H200"], "hostnames": ["gpu-0"]}}

    make_sweep(tmp_path / "ref", ("native", "traceml", "inject_device"), 3, per_trial=figures)
    for path in (tmp_path / "ref").rglob("trial.json"):
        trial = json.loads(path.read_text())
        if trial["mode"] == "inject_device":
            trial["config"]["mode"] = {"name": "inject_device", "role": "calibration",
                                       "workload_args": ["--inject-device-step-ms=2.0"]}
            path.write_text(json.dumps(trial))
    write_report([tmp_path / "ref"])
    report = (tmp_path / "ref" / "report.md").read_text()
    assert "Where the step's time lands, mean ms per step:" in report
    assert "| traceml | GPU idle (ms) | 2.000 ± 0.000 | 3.500 ± 0.000 | +1.500 ms [+1.500, +1.500] |" in report
    assert "Training loop: `host_sync=seed`, the seed script's loop" in report
    line = _reporter().summary_line("ref", tmp_path / "ref", "ok", reference_ms=1.6)
    assert line.startswith("device-check: ref [ok] 9/9 trials ok, NVIDIA H200, host_sync=seed | "), line
    assert "traceml vs native (n=3, steps): per-step +1.600 ms ± 0.248 (+31.9 % of the 5.020 ms step; " \
           "half-width 4.95 %, goal <= 1 %: not reached), seed script's +1.6 ms inside its interval" in line, line
    assert "calibration inject_device: device wait in GPU busy [device] injected 2 ms recovered 2.000 (within); " \
           "device wait in the host step [device] injected 2 ms recovered 2.000 (within)" in line, line
    assert "where, ms/step: native host 5.020 / GPU-busy 3.000 / GPU-idle 2.000; traceml host 6.620 (+1.600) / " \
           "GPU-busy 3.100 (+0.100) / GPU-idle 3.500 (+1.500); inject_device host 7.020 (+2.000)" in line, line


def test_the_summary_line_tells_the_conditions_of_one_sweep_apart(tmp_path):
    """The within-trial sweep runs two loops: each comparison and its `where` part are labelled by its loop."""
    from ddpbench.report import write_report

    for offset, sync in ((0, "seed"), (10, "none")):
        make_sweep(tmp_path / "blocks", ("native", "traceml"), 2, job_offset=offset,
                   condition={"cluster": "gpu", "model": "seed_e2e", "workload.host_sync": sync},
                   per_trial=lambda mode, repeat, sync=sync: {
                       "host_sync": sync, "step_ms": 5.0 + (1.0 if mode == "traceml" else 0.0) + 0.1 * repeat})
    write_report([tmp_path / "blocks"])
    line = _reporter().summary_line("blocks", tmp_path / "blocks", "ok")
    assert "host_sync=none/seed" in line
    for sync in ("seed", "none"):
        assert f"[workload.host_sync={sync}] traceml vs native (n=2, steps): per-step +1.000 ms" in line, line
        assert f"[workload.host_sync={sync}] where, ms/step: native host 5.150; traceml host 6.150" in line, line
