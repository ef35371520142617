"""What a finished paired native/traceml sweep of ``model=tiny`` must hold: shared by the tests that run one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli import trials_in


def check_paired_native_traceml_sweep(sweep: Path, stdout: str, pairs: int = 2, ranks: int = 2) -> None:
    """``-m mode=native,traceml repeat=1-PAIRS`` of RANKS ranks: order, steps, wall decomposition, TraceML's
    summary, report, plots."""
    trials = trials_in(sweep)
    pair_orders = {repeat: ["native", "traceml"] if repeat % 2 else ["traceml", "native"]  # alternating
                   for repeat in range(1, pairs + 1)}
    assert [(t["mode"], t["repeat"], t["pair_position"]) for t in trials] == [
        (mode, repeat, position) for repeat, modes in pair_orders.items() for position, mode in enumerate(modes)]
    assert all(t["status"] == "ok" for t in trials), [t["error"] for t in trials]
    steps, warmup = trials[0]["config"]["stop"]["steps"], trials[0]["config"]["stop"]["warmup_steps"]
    assert {t["steps"] for t in trials} == {steps}
    for t in trials:
        assert t["world_size"] == ranks and [r["steps"] for r in t["ranks"]] == [steps] * ranks
        parts = t["startup_s"] + t["train_s"] + t["teardown_s"]
        assert parts == pytest.approx(t["wall_s"], abs=1e-6)
        assert t["startup_s"] > 0 and t["train_s"] > 0 and t["teardown_s"] > 0
    for t in (t for t in trials if t["mode"] == "traceml"):
        assert t["traceml"] and Path(t["traceml"]["summary_path"]).is_file()
        assert t["traceml"]["steps_analyzed"] == steps + warmup  # warmup steps run inside trace_step too
    assert (sweep / "report.md").stat().st_size > 0
    assert json.loads((sweep / "analysis.json").read_text())
    plots = sorted((sweep / "plots").glob("*.png"))
    kinds = ("slope-traceml.png", "step-time.png", "wall-decomposition.png", "throughput.png")
    # a plot is named CONDITION-KIND; a long condition's slug ends in a digest after a dash of its own
    assert sorted(kind for p in plots for kind in kinds if p.name.endswith(f"-{kind}")) == sorted(kinds), plots
    assert all(p.stat().st_size > 1000 for p in plots)
    report = (sweep / "report.md").read_text()
    assert all(f"plots/{p.name}" in report for p in plots)
    assert "[1/" in stdout and f"[{2 * pairs}/{2 * pairs}] ok" in stdout
