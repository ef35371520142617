"""Report: files written from a synthetic sweep, report contents, CLI exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ddpbench.formats.analysis_record import SCHEMA_VERSION
from ddpbench.report import ReportInputError, write_report
from ddpbench.report.cli import main
from helpers.trials import make_sweep, make_trial, write_trial


def tool_figures(overhead_pct: list[float]):
    """per_trial for make_sweep: traceml throughput overhead = overhead_pct[repeat-1] %."""

    def per_trial(mode: str, repeat: int) -> dict[str, Any]:
        if mode == "traceml":
            return {"train_s": 100.0 * (1 + overhead_pct[repeat - 1] / 100), "startup_s": 6.0}
        if mode == "inject":
            return {"step_ms": 105.0, "startup_s": 7.0, "inject": {"step_ms": 5.0, "startup_s": 2.0}}
        return {}

    return per_trial


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("full")
    sweep = root / "sweep"
    dur = {"cluster": "local", "model": "tiny", "stop": "duration"}
    make_sweep(sweep, ("native", "traceml", "native_aa"), 4, dur, tool_figures([0.4, 0.5, 0.6, 0.5]))
    make_sweep(sweep, ("native", "inject"), 3, {"cluster": "local", "model": "tiny", "stop": "steps"},
               tool_figures([0] * 3), job_offset=100)
    write_trial(sweep, make_trial(sweep_dir=str(sweep), mode="native", repeat=5, condition=dur, job_num=50))
    write_trial(sweep, make_trial(sweep_dir=str(sweep), mode="traceml", repeat=5, condition=dur,
                                  status="timeout", job_num=51, pair_position=1))
    (sweep / "bad").mkdir()
    (sweep / "bad" / "trial.json").write_text('{"schema": "ddpbench.trial", "schema_version": 99}')
    outcome = write_report([sweep], root / "out")
    return outcome, (root / "out" / "report.md").read_text()


def test_every_output_written_and_referenced(full_report) -> None:
    outcome, text = full_report
    out = outcome.report_path.parent
    for name in ("report.md", "analysis.json", "results.csv"):
        assert (out / name).stat().st_size > 0
    assert len(outcome.plot_paths) == 9
    for png in outcome.plot_paths:
        assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
        assert f"]({png.relative_to(out).as_posix()})" in text
    assert not list(out.glob("**/.*.tmp"))
    refs = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert all((out / r).is_file() for r in refs)
    payload = json.loads((out / "analysis.json").read_text())
    assert payload["schema"] == "ddpbench.analysis" and payload["schema_version"] == SCHEMA_VERSION
    assert payload["versions"] == {**payload["versions"], "steps": []}  # no versions= list: nothing compared
    assert payload["skipped"][0]["reason"].startswith("unknown schema_version 99")


def test_outcome_counts_and_verdicts(full_report) -> None:
    outcome, _ = full_report
    assert outcome.verdicts == {"traceml vs native [cluster=local,model=tiny,stop=duration]": "within"}
    assert (outcome.n_trials, outcome.n_ok, outcome.n_skipped) == (20, 19, 1)
    assert outcome.n_pairs == 4 + 4 + 3 and outcome.n_excluded == 2  # repeat 5: traceml timeout, no native_aa
    assert outcome.exit_code() == 0 and outcome.exit_code(fail_over_budget=True) == 0


def test_report_sections_and_caveats(full_report) -> None:
    _, text = full_report
    for heading in ("## Setup", "## Method", "## Results", "## Details", "## Caveats", "## Failed trials", "## Skipped files"):
        assert heading in text
    assert "python3 -m ddpbench -m mode=native,traceml,native_aa" in text
    assert "| `mode.launcher` | `\"torchrun\"` | `\"torchrun\"` | `\"traceml\"` |" in text
    assert "Student's paired t interval" in text and "two-sided paired t test" in text
    assert "wall overhead reflects fixed costs only" in text
    assert "1 pair(s) excluded (no traceml trial" not in text
    assert "traceml trial timeout" in text
    assert re.search(r"noise floor ±\d+\.\d+ % \(A/A in cluster=local,model=tiny,stop=duration\)", text)
    assert re.search(r"Calibration \(inject vs native .*per-step overhead injected 5\.000 ms on the host, recovered 5\.000 ms .*all within 10 %", text)
    assert "| traceml | 5 | timeout |" in text
    assert "schema_version 99" in text
    assert "| traceml | 4 (1) | 100.000 ± 0.000 | +0.500 [+0.370, +0.630] | +0.50 [+0.37, +0.63] |" in text


def test_version_1_records_keep_the_sections_and_add_no_v2_parts(full_report) -> None:
    _, text = full_report
    headings = [l for l in text.splitlines() if l.startswith("## ")]
    assert headings == ["## Setup", "## Method", "## Results", "## Details", "## Caveats", "## Failed trials",
                        "## Skipped files"]
    assert "### Condition `cluster=local,model=tiny,stop=duration`" in text and "Workload: `mlp`." in text
    for absent in ("Tools compared", "Per-phase time", "Peak memory", "read from the workload's output"):
        assert absent not in text
    assert "### Disturbed trials\n\nNone flagged" in text
    assert "Achieved model TFLOP/s per GPU: unknown (CPU trial: no GPU peak to compare with)." in text


def _small(tmp_path: Path, overheads: list[float]) -> Path:
    make_sweep(tmp_path / "s", repeats=len(overheads), per_trial=tool_figures(overheads))
    return tmp_path / "s"


@pytest.mark.parametrize(
    "overheads,gate,expected",
    [([3.0, 3.1, 3.2], True, 1), ([3.0, 3.1, 3.2], False, 0), ([1.0, 3.0, 2.0], True, 3), ([0.1, 0.2, 0.1], True, 0)],
)
def test_cli_exit_codes(tmp_path: Path, overheads: list[float], gate: bool, expected: int) -> None:
    # startup 6 vs 5 s is +1 s once: +0.03 % of the 1 h job the verdict projects onto, so the per-step cost decides
    args = [str(_small(tmp_path, overheads)), "--budget", "2"] + (["--fail-over-budget"] if gate else [])
    assert main(args) == expected
    assert (tmp_path / "s" / "report.md").stat().st_size > 0


@pytest.mark.parametrize("case", ["missing", "empty", "no_trials", "unwritable"])
def test_cli_bad_input_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    args: list[str]
    if case == "missing":
        args = [str(tmp_path / "nope")]
    elif case == "empty":
        (tmp_path / "e").mkdir()
        args = [str(tmp_path / "e")]
    elif case == "no_trials":
        (tmp_path / "n" / "0").mkdir(parents=True)
        (tmp_path / "n" / "0" / "other.json").write_text("{}")
        args = [str(tmp_path / "n")]
    else:
        sweep = _small(tmp_path, [0.1, 0.2])
        (tmp_path / "file").write_text("x")
        args = [str(sweep), "--out", str(tmp_path / "file" / "sub")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("ddpbench-report: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_write_report_raises_input_error(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="no trial.json found"):
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "x.txt").write_text("")
        write_report([tmp_path / "d"], tmp_path / "out")


def test_fixed_cost_caveat_when_start_up_dominates_the_wall_difference(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    cond = {"cluster": "local", "model": "tiny", "stop": "steps"}

    def per_trial(mode: str, repeat: int) -> dict[str, Any]:
        if mode == "traceml":  # +3 s start-up, +2 s teardown, +1 % per step
            return {"startup_s": 8.0 + 0.04 * repeat, "teardown_s": 3.0, "train_s": 101.0}
        return {"startup_s": 5.0, "teardown_s": 1.0, "train_s": 100.0}

    make_sweep(sweep, ("native", "traceml"), 4, cond, per_trial)
    outcome = write_report([sweep], tmp_path / "out")
    text = outcome.report_path.read_text()
    line = next(l for l in text.splitlines() if "fixed per-trial cost" in l)
    assert "5.10 s of the 6.10 s wall difference" in line
    assert "start-up +3.10 s, teardown +2.00 s" in line


def test_no_fixed_cost_caveat_when_the_difference_is_per_step(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    cond = {"cluster": "local", "model": "tiny", "stop": "steps"}
    make_sweep(sweep, ("native", "traceml"), 4, cond,
               lambda mode, repeat: {"train_s": 110.0 + 0.1 * repeat} if mode == "traceml" else {})
    text = write_report([sweep], tmp_path / "out").report_path.read_text()
    assert "fixed per-trial cost" not in text
