"""Every bad input: one clear line, a non-zero exit, no traceback, and no earlier result touched."""

from __future__ import annotations

import hashlib
import json
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from helpers.cli import CliRun, run_ddpbench

# (id, extra config-dir files {relative path: text}, arguments, text the error must contain)
CASES: List[Tuple[str, Dict[str, str], List[str], str]] = [
    ("unknown-mode", {}, ["mode=bogus"], "Available options in 'mode'"),
    ("unknown-model", {}, ["model=huge"], "Available options in 'model'"),
    ("unknown-cluster", {}, ["-m", "cluster=moon", "mode=native"], "Available options in 'cluster'"),
    ("steps-zero", {}, ["stop.steps=0"], "stop.steps=0: must be >= 1"),
    ("duration-negative", {}, ["stop=duration", "stop.duration_sec=-1"], "stop.duration_sec=-1.0: must be > 0"),
    ("nproc-zero", {}, ["cluster.nproc_per_node=0"], "cluster.nproc_per_node=0: must be >= 1"),
    ("batch-zero", {}, ["model.batch_size=0"], "model.batch_size=0: must be >= 1"),
    ("batch-not-int", {}, ["model.batch_size=abc"], "could not be converted to Integer"),
    ("unknown-mode-key-override", {}, ["mode.foo=1"], "Key 'foo' not in 'ModeConfig'"),
    ("unknown-cluster-key-added", {}, ["+cluster.nope=1"], "cluster.nope: Key 'nope' not in 'ClusterConfig'"),
    ("unknown-nested-key-added-in-sweep", {}, ["-m", "mode=native,traceml", "+tool.wandb.nope=1"],
     "tool.wandb.nope: Key 'nope' not in 'WandbConfig'"),
    ("repeat-reversed", {}, ["-m", "mode=native,traceml", "repeat=5-1"], "repeat=5-1: range start 5 is after its end 1"),
    ("repeat-letters", {}, ["-m", "mode=native,traceml", "repeat=a-b"], "repeat=a-b: not an integer or a range"),
    ("repeat-single-not-int", {}, ["repeat=abc"], "repeat='abc': must be an integer label"),
    ("duplicate-mode", {}, ["-m", "mode=native,native"], "a mode appears twice"),
    ("auto-one-mode", {}, ["-m", "mode=native", "repeat=auto"], "repeat=auto compares modes: give at least two"),
    ("auto-min-above-max", {}, ["-m", "mode=native,traceml", "repeat=auto", "precision.min_pairs=5",
                                "precision.max_pairs=3"], "precision: min_pairs (5) is above max_pairs (3)"),
    ("auto-unknown-metric", {}, ["-m", "mode=native,traceml", "repeat=auto", "precision.metric=joy"],
     "precision.metric='joy': must be one of"),
    ("auto-halfwidth-zero", {}, ["-m", "mode=native,traceml", "repeat=auto", "precision.halfwidth_pct=0"],
     "precision half-width must be positive"),
    ("auto-disturbed-unknown", {}, ["-m", "mode=native,traceml", "repeat=auto", "precision.disturbed=ignore"],
     "Invalid value 'ignore', expected one of [rerun, count]"),
    ("baseline-not-in-sweep", {}, ["-m", "mode=native,traceml", "baseline=nosuchmode"],
     "baseline=nosuchmode: not a mode of this sweep (its modes: native, traceml)"),
    ("fault-rank-outside-world", {}, ["fault.rank=7"], "fault.rank=7: must be null or in [0, 1]"),
    ("switching-an-outside-sampler", {}, ["-m", "mode=native,pyspy", "switching=blocks"],
     "switching=blocks: mode=pyspy cannot be switched inside a trial"),
    ("auto-switched-metric-without-switching", {}, ["-m", "mode=native,traceml", "repeat=auto",
                                                    "precision.metric=switched_step_overhead_ms", "precision.budget_ms=1"],
     "precision.metric=switched_step_overhead_ms: the within-trial figure needs switching=blocks"),
    ("switching-washout-past-block", {}, ["switching=blocks", "switching.block_steps=4", "switching.washout_steps=4"],
     "switching.washout_steps=4: must be >= 0 and < switching.block_steps=4"),
    ("samples-below-global-batch", {}, ["model.num_samples=4"], "must be >= one global batch"),
    ("device-unknown", {}, ["cluster.device=tpu"], "Invalid value 'tpu', expected one of [auto, cpu, cuda]"),
    ("check-every-zero", {}, ["stop=duration", "stop.check_every=0"], "stop.check_every=0: must be >= 1"),
    ("unwritable-run-dir", {}, ["hydra.run.dir=/proc/ddpbench-nope"], "cannot write the run dir /proc/ddpbench-nope"),
    ("unwritable-sweep-dir", {}, ["-m", "mode=native", "hydra.sweep.dir=/proc/ddpbench-nope"],
     "cannot write the sweep dir /proc/ddpbench-nope"),
    ("tool-not-installed", {"mode/ghost.yaml": "defaults:\n  - native\n  - _self_\nname: ghost\n"
                            "requires: ghost_tool_xyz\nrequires_package: ghost-tool\n"},
     ["mode=ghost"], "needs the Python package 'ghost-tool'"),
    ("unknown-field-in-mode-file", {"mode/typo.yaml": "defaults:\n  - native\n  - _self_\nname: typo\ncomand: []\n"},
     ["mode=typo"], "Key 'comand' not in 'ModeConfig'"),
    ("port-already-taken", {}, ["-m", "mode=native", "cluster=static_2node", "cluster.master_addr=127.0.0.1",
                                "sweep_name=taken", "cluster.base_port={taken_port}"],
     "cannot listen on its coordinator port {taken_port}: Address already in use"),
    ("unknown-placeholder-in-mode", {"mode/holes.yaml": "defaults:\n  - native\n  - _self_\nname: holes\n"
                                     "tool_args: ['--x={nope}']\ncommand: ['{python}', '{tool_args}']\n"},
     ["-m", "mode=holes"], "unknown placeholder {nope}"),
]


def _tree_digest(root: Path) -> Dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Tuple[CliRun, Dict[str, str], Dict[str, str]]]:
    """Run every case (4 at a time) in a folder that already holds earlier results."""
    base = tmp_path_factory.mktemp("bad-input")
    results: Dict[str, Tuple[CliRun, Dict[str, str], Dict[str, str]]] = {}
    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("0.0.0.0", 0))
    held.listen()
    taken_port = str(held.getsockname()[1])

    def run(case: Tuple[str, Dict[str, str], List[str], str]) -> None:
        name, files, args, _ = case
        cwd = base / name
        earlier = cwd / "outputs" / "multirun" / "earlier" / "mode=native,repeat=1"
        earlier.mkdir(parents=True)
        (earlier / "trial.json").write_text(json.dumps({"schema": "ddpbench.trial", "status": "ok"}))
        before = _tree_digest(cwd / "outputs")
        extra: List[str] = []
        if files:
            conf = cwd / "userconf"
            for rel, text in files.items():
                (conf / rel).parent.mkdir(parents=True, exist_ok=True)
                (conf / rel).write_text(text)
            extra = ["--config-dir", str(conf)]
        args = [arg.replace("{taken_port}", taken_port) for arg in args]
        outcome = run_ddpbench([*extra, *args, "model.num_samples=1024" if name != "samples-below-global-batch"
                                else "model.batch_size=8"], cwd, timeout=120)
        results[name] = (outcome, before, _tree_digest(cwd / "outputs"))

    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(run, CASES))
    finally:
        held.close()
    for name, (outcome, before, after) in results.items():
        results[name] = (outcome, before, after)
    _PORT["taken"] = taken_port
    return results


_PORT: Dict[str, str] = {}


@pytest.mark.parametrize("name,files,args,expected", CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_one_clear_line(outcomes, name: str, files, args, expected: str) -> None:
    run, before, after = outcomes[name]
    expected = expected.replace("{taken_port}", _PORT["taken"])
    assert run.returncode != 0, run.output
    assert any(expected in line for line in (run.stderr + run.stdout).splitlines()), run.output  # on one line
    assert "Traceback" not in run.stderr + run.stdout, run.output
    assert "full_key:" not in run.stderr and "HYDRA_FULL_ERROR" not in run.stderr, run.output  # Hydra's own lines
    assert before == after, "an earlier result was changed, or a bad run left files behind"


def test_at_least_fifteen_cases() -> None:
    assert len(CASES) >= 15
