"""Versions compared and the history across sweeps: pure statistics on synthetic trial records; the arm order."""

from __future__ import annotations

import json
import re
from pathlib import Path
import pytest

from helpers.trials import write_versions_sweep as write_sweep
from ddpbench.analysis.history import history
from ddpbench.analysis.versions import compare_versions, verdicts_exit_code
from ddpbench.choices import Verdict
from ddpbench.collect.collector import collect_trials
from ddpbench.formats.condition import arm_name, base_mode
from ddpbench.report.cli import main as report_main, regression_exit_from_record
from ddpbench.sweep.order import SweepOrderError, order_jobs

def test_arm_names() -> None:
    assert arm_name("traceml", "0.4.2") == "traceml==0.4.2"
    assert arm_name("traceml", None) == "traceml"
    assert arm_name("traceml", "dist/traceml_ai-0.4.2-py3-none-any.whl") == "traceml@traceml_ai-0.4.2-py3-none-any.whl"
    assert arm_name("traceml", "traceml-ai<0.5") == "traceml[traceml-ai<0.5]"
    assert base_mode("traceml==0.4.2") == base_mode("traceml@checkout@v2") == "traceml"


def test_versions_are_arms_of_one_williams_block() -> None:
    swept = {"mode": ["mode=native", "mode=traceml"], "repeat": ["repeat=1-6"]}
    jobs = order_jobs(swept, versions={"traceml": ["0.4.2", "0.5.0"]})
    assert len(jobs) == 18
    blocks = [jobs[i:i + 3] for i in range(0, 18, 3)]
    firsts = set()
    for block in blocks:
        arms = [(o for o in job.overrides) for job in block]
        names = [" ".join(sorted(a for a in job.overrides if a.startswith(("mode=", "version=")))) for job in block]
        assert sorted(names) == ["mode=native", "mode=traceml version='0.4.2'", "mode=traceml version='0.5.0'"]
        assert [job.pair_position for job in block] == [0, 1, 2] and arms
        firsts.add(names[0])
    assert len(firsts) == 3  # every arm leads some repeat (Williams rows)
    assert order_jobs(swept) == order_jobs(swept, versions={})  # without versions: as before
    with pytest.raises(SweepOrderError, match="not one of"):
        order_jobs(swept, versions={"pyspy": ["0.4"]})
    with pytest.raises(SweepOrderError, match="twice"):
        order_jobs(swept, versions={"traceml": ["0.4.2", "0.4.2"]})


def test_regression_between_versions(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path, "s", {"native": [10.0, 10.1, 9.9, 10.0], "traceml==0.4.2": [10.5, 10.6, 10.4, 10.5],
                                        "traceml==0.5.0": [11.5, 11.7, 11.4, 11.5]})
    steps = compare_versions(collect_trials([sweep]).frame, regression_pct=1.0)
    assert len(steps) == 1
    step = steps[0]
    assert (step.previous, step.current, step.previous_version, step.current_version) == (
        "traceml==0.4.2", "traceml==0.5.0", "0.4.2", "0.5.0")
    assert step.n_pairs == 4 and step.metrics["step_ms"].mean == pytest.approx(1.025)
    assert step.verdict == Verdict.over and verdicts_exit_code(s.verdict for s in steps) == 1
    assert compare_versions(collect_trials([sweep]).frame, regression_pct=20.0)[0].verdict == Verdict.within
    assert report_main([str(sweep), "--out", str(tmp_path / "r"), "--fail-on-regression"]) == 1
    report = (tmp_path / "r" / "report.md").read_text()
    assert "## Versions compared" in report and "**regression**" in report
    assert (tmp_path / "r" / "plots" / "versions-step-overhead.png").stat().st_size > 0
    record = json.loads((tmp_path / "r" / "analysis.json").read_text())
    recorded = record["versions"]["steps"][0]
    assert record["versions"]["regression_pct"] == 1.0 and recorded["verdict"] == "regression"
    assert (recorded["previous"], recorded["current"], recorded["n_pairs"]) == ("traceml==0.4.2", "traceml==0.5.0", 4)
    assert recorded["metrics"]["step_ms"]["mean"] == pytest.approx(1.025)
    assert recorded["metrics"]["step_pct"]["ci_low"] > 1.0 and recorded["metrics"]["memory_mb"]["mean"] == 0.0
    # --fail-on-regression's exit code is the record's: a CI script reading analysis.json gets the same answer
    for verdicts, code in ((["no regression"], 0), (["no regression", "inconclusive"], 3), (["regression", "inconclusive"], 1),
                           (["a verdict from a newer ddpbench"], 3)):
        record["versions"]["steps"] = [{**recorded, "verdict": v} for v in verdicts]
        (tmp_path / "edited.json").write_text(json.dumps(record))
        assert regression_exit_from_record(tmp_path / "edited.json") == code
    (tmp_path / "edited.json").write_text(json.dumps({**record, "schema_version": 4, "versions": None}))
    assert regression_exit_from_record(tmp_path / "edited.json") == 2  # a record without the comparison: said, not 0


def test_one_pair_is_inconclusive_and_no_versions_compares_nothing(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path, "one", {"native": [10.0], "traceml==0.4.2": [10.5], "traceml==0.5.0": [12.0]})
    steps = compare_versions(collect_trials([sweep]).frame)
    assert [s.verdict for s in steps] == [Verdict.inconclusive] and verdicts_exit_code(s.verdict for s in steps) == 3
    plain = write_sweep(tmp_path, "plain", {"native": [10.0, 10.0], "traceml": [10.5, 10.6]}, versions={})
    assert compare_versions(collect_trials([plain]).frame) == [] and verdicts_exit_code([]) == 0
    assert report_main([str(plain), "--out", str(tmp_path / "p"), "--fail-on-regression"]) == 0


def test_history_flags_a_step_change(tmp_path: Path) -> None:
    a = write_sweep(tmp_path, "a", {"native": [10.0, 10.1, 9.9], "traceml==0.4.2": [10.5, 10.7, 10.3]},
                    versions={"traceml": ["0.4.2"]}, date="2026-11-01")
    b = write_sweep(tmp_path, "b", {"native": [10.0, 10.1, 9.9], "traceml==0.5.0": [10.6, 10.5, 10.6]},
                    versions={"traceml": ["0.5.0"]}, date="2026-11-15")
    c = write_sweep(tmp_path, "c", {"native": [10.0, 10.1, 9.9], "traceml==0.6.0": [12.0, 12.0, 12.0]},
                    versions={"traceml": ["0.6.0"]}, date="2026-12-01")
    other = write_sweep(tmp_path, "d", {"native": [10.0, 10.1, 9.9], "traceml==0.6.0": [10.5, 10.6, 10.4]},
                        versions={"traceml": ["0.6.0"]}, cpu="cpu-y")
    points = history(collect_trials([c, a, b, other]).frame).points
    x = [p for p in points if p.series[0] == "cpu-x"]
    assert [p.version for p in x] == ["0.4.2", "0.5.0", "0.6.0"]
    assert [p.step_change for p in x] == [False, False, True]
    assert [p.step_change for p in points if p.series[0] == "cpu-y"] == [False]
    assert report_main(["--history", str(a), str(b), str(c), str(other), "--out", str(tmp_path / "h")]) == 0
    text = (tmp_path / "h" / "history.md").read_text()
    assert text.count("**yes**") == 1 and (tmp_path / "h" / "plots" / "history.png").exists()


def test_command_by_version_adapts_the_template() -> None:
    from ddpbench.config import ModeConfig
    from ddpbench.versions.arm import template_flags, template_for

    mode = ModeConfig(name="traceml", command=["{python}", "-m", "new", "--mode=summary", "--args", "{workload_args}"],
                      command_by_version={"<0.4": ["{python}", "-m", "old", "--summary-window-rows=5"]})
    assert template_for(mode, "0.3.6")[2] == "old" and template_for(mode, "0.5.0")[2] == "new"
    assert template_for(mode, None)[2] == "new"
    assert template_flags(template_for(mode, "0.5.0")) == ["--mode"]
    assert template_flags(template_for(mode, "0.3.6")) == ["--summary-window-rows"]


def test_unknown_tool_summary_format_is_said_in_the_report(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path, "u", {"native": [10.0, 10.1], "traceml": [10.5, 10.6]}, versions={})
    for path in sweep.glob("*/trial.json"):
        trial = json.loads(path.read_text())
        if trial["mode"] == "traceml":
            trial["tool"] = {"name": "traceml", "artifacts": [], "bytes": 1, "usable": True, "format": "unknown",
                             "problem": "tool summary: unknown format (schema_version 2.0) (traceml-ai 0.6.0)"}
            path.write_text(json.dumps(trial))
    assert report_main([str(sweep), "--out", str(tmp_path / "r")]) == 0
    report = (tmp_path / "r" / "report.md").read_text()
    assert "traceml: tool summary: unknown format (schema_version 2.0) (traceml-ai 0.6.0) in 2 trial(s)" in report


def test_ci_example_workflow_uses_real_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/ci/tool-gate.yml parses, and every ddpbench-report flag it uses is one the command has."""
    import yaml

    workflow = yaml.safe_load((Path(__file__).resolve().parents[1] / "docs" / "ci" / "tool-gate.yml").read_text())
    script = "\n".join(step.get("run", "") for step in workflow["jobs"]["overhead"]["steps"])
    used = {flag for line in script.splitlines() if "ddpbench-report" in line for flag in re.findall(r"--[a-z-]+", line)}
    with pytest.raises(SystemExit):
        report_main(["--help"])
    assert used and used <= set(re.findall(r"--[a-z-]+", capsys.readouterr().out)), used
    assert "versions={traceml:" in script and "--fail-on-regression" in used
