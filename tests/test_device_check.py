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

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "device-check.sh"
HELPER = REPO / "scripts" / "device_check.py"
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
    """The `run` path on CPU: three sweeps, the calibration one overrunning its bound; the others still run."""
    work, out = tmp_path / "work", tmp_path / "out"
    env = child_env({"PYTHON": sys.executable, "WHEEL_DIR": str(wheel_dir), "WORK_DIR": str(work), "OUT": str(out),
                     "CAL_SEC": "120", "CAL_CAP_S": "12", "PYTHONUNBUFFERED": "1",
                     # room for the two sweeps that must finish on a loaded machine (the defaults fit a GPU run)
                     "REF_CAP_S": "240", "AA_CAP_S": "240", "BUDGET_S": "540"})
    env.pop("PYTHONPATH", None)
    run = run_bounded(["bash", str(SCRIPT), "selftest"], timeout=600, env=env, cwd=tmp_path, poll_s=0.5)
    text = run.output
    assert PLUGIN_SCAN_BUG not in text, "Hydra's plugin scan breaks on the wheel install"
    assert run.returncode == 1, text[-4000:]  # a sweep hit its bound: the run says so
    lines = (out / "summary.txt").read_text().splitlines()
    assert [line.split()[1] for line in lines] == ["ref", "calibration", "aa"], lines
    ref, cal, aa = lines
    assert "[ok] 2/2 trials ok" in ref and "traceml vs native (n=1, duration)" in ref, ref
    assert "ms/step" in ref and "TFLOP/s" in ref
    assert "[stopped at its 12s bound]" in cal, cal
    assert "[ok] 2/2 trials ok" in aa and "native_aa vs native (n=1" in aa, aa
    for line in lines:  # the summary lines are also in the output (the device tool's output_tail)
        assert line in run.stdout
    with tarfile.open(out / "device-check.tar.gz") as tar:
        names = set(tar.getnames())
    for sweep in ("ref", "aa"):
        for name in ("report.md", "analysis.json", "results.csv"):
            assert f"./outputs/multirun/{sweep}/{name}" in names
        assert any(n.startswith(f"./outputs/multirun/{sweep}/plots/") and n.endswith(".png") for n in names)
    assert {"./combined/report.md", "./summary.txt", "./environment.txt", "./ref.log", "./calibration.log"} <= names
    analysis = json.loads((work / "outputs/multirun/ref/analysis.json").read_text())
    assert analysis["n_ok"] == 2
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
