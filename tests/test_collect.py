"""Collector: flattening, skipping bad files with reasons, and the ddpbench-collect CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from ddpbench.collect import collect_trials
from ddpbench.collect.cli import main
from helpers.trials import make_rank_record, make_sweep, make_trial, write_trial


def test_one_row_per_trial_with_documented_columns(tmp_path: Path) -> None:
    make_sweep(tmp_path / "sw", repeats=3)
    res = collect_trials([tmp_path / "sw"])
    assert res.skipped == [] and res.files_seen == 6
    f = res.frame
    assert len(f) == 6
    for col in (
        "source_path", "mode", "repeat", "pair_position", "condition_id", "status", "wall_s",
        "steps_per_s", "step_time_ms_mean", "step_time_ms_p99", "cond_cluster", "cond_model",
        "cond_stop", "env_hostnames", "env_cpu_count", "inject_step_ms", "inject_startup_s",
        "inject_teardown_s", "stop_kind", "n_ranks", "overrides_json", "config_json",
        "traceml_steps_analyzed", "traceml_step_time_ms_forward_ms",
    ):
        assert col in f.columns, col
    native = f[f["mode"] == "native"].iloc[0]
    assert native["wall_s"] == 106.0 and native["steps_per_s"] == 10.0
    assert native["step_time_ms_mean"] == 100.0 and native["stop_kind"] == "steps"
    assert json.loads(native["overrides_json"])[0] == "mode=native"
    assert list(f["job_num"]) == sorted(f["job_num"])


def test_failed_trial_kept_with_null_figures(tmp_path: Path) -> None:
    write_trial(tmp_path, make_trial(status="failed"))
    f = collect_trials([tmp_path]).frame
    assert f.loc[0, "status"] == "failed" and math.isnan(f.loc[0, "wall_s"])
    assert f.loc[0, "error"] == "rank 1 exited with code 1"


def test_bad_files_skipped_with_reasons(tmp_path: Path) -> None:
    write_trial(tmp_path, make_trial(job_num=0))
    bad = {
        "1": "{not json",
        "2": "",
        "3": json.dumps([1, 2]),
        "4": json.dumps({**make_trial(), "schema": "other.thing"}),
        "5": json.dumps({**make_trial(), "schema_version": 99}),
        "6": json.dumps({k: v for k, v in make_trial().items() if k != "condition_id"}),
        "7": json.dumps({**make_trial(), "wall_s": None}),
        "8": json.dumps({**make_trial(), "repeat": "one"}),
    }
    for sub, text in bad.items():
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "trial.json").write_text(text)
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "trial.json").write_text("{}")
    res = collect_trials([tmp_path, tmp_path / "0" / "trial.json", tmp_path / "nope"])
    assert len(res.frame) == 1
    reasons = {Path(p).parent.name: r for p, r in res.skipped}
    assert reasons["nope"] if "nope" in reasons else True
    assert reasons["1"].startswith("malformed JSON")
    assert reasons["2"] == "empty file"
    assert reasons["3"].startswith("not a JSON object")
    assert reasons["4"].startswith("unknown schema 'other.thing'")
    assert reasons["5"].startswith("unknown schema_version 99")
    assert reasons["6"] == "partial record: missing condition_id"
    assert reasons["7"] == "status ok but not a number: wall_s"
    assert reasons["8"] == "field 'repeat' has type str"
    assert any(r == "path does not exist" for _, r in res.skipped)
    assert not any(".hydra" in p for p, _ in res.skipped)


def test_cli_writes_csv_and_parquet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_sweep(tmp_path / "sw", repeats=2)
    (tmp_path / "sw" / "bad").mkdir()
    (tmp_path / "sw" / "bad" / "trial.json").write_text("{")
    assert main([str(tmp_path / "sw")]) == 0
    err = capsys.readouterr().err
    assert "skipped" in err and "malformed JSON" in err
    csv = pd.read_csv(tmp_path / "sw" / "results.csv")
    assert len(csv) == 4 and "step_time_ms_median" in csv.columns
    pytest.importorskip("pyarrow")
    assert len(pd.read_parquet(tmp_path / "sw" / "results.parquet")) == 4
    assert main([str(tmp_path / "sw"), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "results.csv").stat().st_size > 0


def test_parquet_holds_a_column_whose_kinds_differ_between_trials(tmp_path: Path) -> None:
    """One trial's record lists its log paths, another's names one: results.parquet is still written, both as text."""
    pytest.importorskip("pyarrow")
    listed, named = make_trial(job_num=0), make_trial(job_num=1, mode="traceml")
    listed["logs"]["stdout"] = ["/job/logs/node0.stdout.log", "/job/logs/node1.stdout.log"]
    for trial in (listed, named):
        write_trial(tmp_path / "sw", trial)
    assert main([str(tmp_path / "sw")]) == 0
    stdout = pd.read_parquet(tmp_path / "sw" / "results.parquet").set_index("mode")["logs_stdout"]
    assert json.loads(stdout["native"]) == listed["logs"]["stdout"]
    assert stdout["traceml"] == named["logs"]["stdout"]
    assert pd.read_csv(tmp_path / "sw" / "results.csv")["logs_stdout"].notna().all()


def test_cli_bad_input_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("ddpbench-collect: error: no such path")
    assert main([str(tmp_path)]) == 2
    assert "no usable trial.json" in capsys.readouterr().err


def test_load_step_times_reads_rank_zero_arrays(tmp_path) -> None:
    import json as _json

    import pandas as _pd

    from ddpbench.collect import load_step_times

    with_steps, without = tmp_path / "a", tmp_path / "b"
    for folder in (with_steps, without):
        (folder / "metrics").mkdir(parents=True)
    (with_steps / "metrics" / "rank-0.json").write_text(_json.dumps(make_rank_record(0, [1.0, 2.0, 3.0])))
    (without / "metrics" / "rank-0.json").write_text(_json.dumps(make_rank_record(0)))
    frame = _pd.DataFrame({"mode": ["native", "traceml", "native"], "repeat": [1, 1, 2],
                           "status": ["ok", "ok", "failed"],
                           "job_dir": [str(with_steps), str(without), str(with_steps)]})
    steps = load_step_times(frame)
    assert steps.to_dict("list") == {"mode": ["native"] * 3, "repeat": [1] * 3, "step_ms": [1.0, 2.0, 3.0]}
    assert load_step_times(frame[frame["mode"] == "traceml"]).empty
