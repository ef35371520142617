"""Trial record v2 in the analysis and the report: robust intervals, near-zero %, disturbance, phases,
memory, several tools, workload metrics, TFLOP/s, workload sections (synthetic records: pure parts)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ddpbench.analysis.flops import achieved_tflops, fraction_of_peak, step_flops_for_model
from ddpbench.analysis.paired import analysis_to_dict, analyze
from ddpbench.analysis.results import FigureGroup
from ddpbench.analysis.robust import wilcoxon_interval
from ddpbench.collect.collector import collect_trials, flatten_trial, write_results
from ddpbench.formats.trial_record import FORMAT
from ddpbench.formats import analysis_record
from ddpbench.formats.rank_record import PHASES
from ddpbench.report import write_report
from ddpbench.report.markdown import render_report
from helpers.trials import make_trial, step_summary, write_trial

COND = {"cluster": "local", "model": "tiny", "stop": "steps"}
PHASE_MS = {"data_wait": 0.02, "h2d": 0.5, "forward": 30.0, "backward": 50.0, "optimizer": 15.0, "other": 4.48}


def v2(mode: str, repeat: int, position: int, job: int, sweep: str = "/s", **kw: Any) -> dict[str, Any]:
    """A version 2 trial: the v1 factory's figures plus the v2 sections (null unless given)."""
    sections = {"schema_version": 2, "workload": "mlp", "timing": "step", "phase_time_ms": None, "memory": None,
                "attempt": {"number": 1, "dir": f"{sweep}/{job}"}, "load": None, "metrics": None, "tool": None}
    named = ("train_s", "startup_s", "teardown_s", "step_ms", "condition", "steps")
    nulls = {k: kw.pop(k) for k in named if k in kw and kw[k] is None}  # unknown: null in the record
    fig = {k: kw.pop(k) for k in named if k in kw}
    trial = make_trial(sweep_dir=sweep, mode=mode, repeat=repeat, pair_position=position, job_num=job,
                       **fig, **{**sections, **kw})
    trial.update(nulls)
    return trial


def paired(per_trial, modes=("native", "traceml"), repeats: int = 5, sweep: str = "/s") -> list[dict[str, Any]]:
    """Alternating-order v2 sweep; ``per_trial(mode, repeat)`` gives figures and sections."""
    out, job = [], 0
    for r in range(1, repeats + 1):
        order = list(modes) if r % 2 else list(reversed(modes))
        for pos, m in enumerate(order):
            out.append(v2(m, r, pos, job, sweep, **per_trial(m, r)))
            job += 1
    return out


def frame_of(trials: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([flatten_trial(FORMAT.upgrade(t), f"/x/{i}/trial.json") for i, t in enumerate(trials)])


def only(analysis, mode: str = "traceml"):
    (c,) = [c for c in analysis.comparisons if c.mode == mode]
    return c


def phases(scale: float = 1.0, extra_forward: float = 0.0) -> dict[str, dict[str, float]]:
    return {p: step_summary(ms * scale + (extra_forward if p == "forward" else 0.0), 0.0) for p, ms in PHASE_MS.items()}


def test_median_step_robust_interval_and_no_pct_against_near_zero() -> None:
    extra = [0.4, 0.5, 0.6, 0.5, 9.0]  # one slow pair

    def fig(mode: str, r: int) -> dict[str, Any]:
        if mode == "native":
            return {"startup_s": 0.5, "teardown_s": 0.3}
        return {"startup_s": 0.9, "teardown_s": 0.3, "train_s": 100.0 + extra[r - 1] / 10,
                "step_time_ms": {**step_summary(100.0 + extra[r - 1]), "median": 100.0 + min(extra[r - 1], 0.6)}}

    c = only(analyze(frame_of(paired(fig))))
    w = wilcoxon_interval(extra)
    r = c.robust["step_overhead_ms"]
    assert (r.estimate, r.ci_low, r.ci_high) == pytest.approx((w.estimate, w.ci_low, w.ci_high))
    assert r.achieved_confidence == pytest.approx(1 - 2 / 32) and math.isfinite(r.boot_low)
    assert c.metrics["step_median_overhead_ms"].max == pytest.approx(0.6)
    # start-up baseline 0.5 s, teardown 0.3 s: near zero, so no percentage, but the absolute difference stays
    assert "startup_diff_pct" not in c.metrics and "teardown_diff_pct" not in c.metrics
    assert "near zero" in c.pct_notes["startup_diff_pct"]
    assert c.metrics["startup_diff_s"].mean == pytest.approx(0.4)
    text = render_report(analyze(frame_of(paired(fig))), frame_of(paired(fig)), {}, ["/s"])
    line = next(l for l in text.splitlines() if l.startswith("| traceml | 5 (0) |"))
    # mean per-step Δ (t), its %, then the median step's Hodges–Lehmann [Wilcoxon]: the slow pair moves only the first
    assert "| +2.200 [-2.521, +6.921] | +2.20 [-2.52, +6.92] | +0.500 [+0.400, +0.600] (93.8 %) |" in line
    assert "| step_overhead_ms (ms) | +2.200 |" in text and "| +0.550 [+0.400, +9.000] (93.8 %) |" in text
    assert "`startup_diff_pct` not shown — baseline 0.5 s is near zero" in text
    assert "| startup_diff_pct (%) | —" in text and "| startup_diff_pct (%) | +" not in text


def test_disturbed_trial_and_pair_flagged_outlier_found_v1_and_null_load_ignored() -> None:
    quiet = {"n_cpus": 2, "own_cpus": None, "load1_start": 2.0, "load1_end": 2.1, "foreign_cpu_s": 0.5,
             "steal_s": 0.0, "cpu_affinity": "none"}
    busy = {**quiet, "foreign_cpu_s": 60.0}
    overhead = [1.0, 1.1, 0.9, 1.0, 1.05, 25.0]

    def fig(mode: str, r: int) -> dict[str, Any]:
        load = busy if (mode == "traceml" and r == 6) else (None if r == 1 else quiet)
        return {"load": load, **({"train_s": 100.0 * (1 + overhead[r - 1] / 100)} if mode == "traceml" else {})}

    trials = paired(fig, repeats=6)
    trials.append(make_trial(sweep_dir="/v1", mode="native", repeat=1))  # version 1: no load section
    a = analyze(frame_of(trials))
    (t,) = a.disturbed_trials
    assert (t.mode, t.repeat) == ("traceml", 6) and "other processes used 60.0 CPU s" in t.reason
    kinds = {(f.kind, f.repeat) for f in only(a).flags}
    assert ("disturbed pair", 6) in kinds and ("outlier pair", 6) in kinds
    assert all(f.repeat == 6 for f in only(a).flags)
    text = render_report(a, frame_of(trials), {}, ["/s"])
    part = text.split("### Disturbed trials", 1)[1].split("## Failed trials")[0]
    assert "disturbed trial: traceml repeat 6" in part and "mode trial: other processes used" in part
    assert "outlier pair: traceml repeat 6" in part and "robust SDs from the median" in part
    assert "1 trial(s) ran while other work took part of the machine, 1 pair(s) disturbed" in text


def test_phase_table_memory_rows_and_plot(tmp_path: Path) -> None:
    sweep = tmp_path / "s"

    def fig(mode: str, r: int) -> dict[str, Any]:
        tool = mode == "traceml"
        return {"timing": "phase", "phase_time_ms": phases(extra_forward=2.0 + 0.1 * r if tool else 0.0),
                "step_ms": 100.0 + (2.0 + 0.1 * r if tool else 0.0),
                "memory": {"host_peak_rss_bytes": int((500 + (40 + r if tool else 0)) * 1e6),
                           "cuda_peak_allocated_bytes": None}}

    for t in paired(fig, repeats=4, sweep=str(sweep)):
        write_trial(sweep, t)
    outcome = write_report([sweep], tmp_path / "out")
    c = only(outcome.analysis)
    rows = {(r.group, r.name): r for r in c.rows}
    assert [r.name for r in c.rows if r.group == FigureGroup.phase] == list(PHASES)
    fwd = rows[("phase", "forward")]
    assert fwd.diff.mean == pytest.approx(2.25) and fwd.pct is not None and fwd.pct.mean == pytest.approx(7.5)
    assert rows[("phase", "data_wait")].pct is None and "near zero" in str(rows[("phase", "data_wait")].note)
    assert rows[("phase", "h2d")].pct is None and "under 1%" in str(rows[("phase", "h2d")].note)
    mem = rows[("memory", "host peak RSS")]
    assert (mem.base.mean, mem.diff.mean, mem.pct.mean) == pytest.approx((500.0, 42.5, 8.5))
    assert ("memory", "CUDA peak allocated") not in rows
    text = outcome.report_path.read_text()
    assert "Per-phase time, mean ms per step:" in text and "intrusive" not in text.split("## Method")[0]
    assert "| traceml | forward (ms) | 30.000 ± 0.000 | 32.250 ± 0.205 | +2.250 ms [" in text
    assert "| traceml | data_wait (ms) |" in text and "no % — baseline 0.02 ms is near zero" in text
    assert "quote the `timing=step` figures" in text
    assert "| traceml | host peak RSS (MB) | 500.00 ± 0.00 | 542.50 ± 2.05 | +42.50 MB [" in text
    png = tmp_path / "out" / "plots" / "cluster_local_model_tiny_stop_steps-phases.png"
    assert png.read_bytes()[:4] == b"\x89PNG" and "](plots/cluster_local_model_tiny_stop_steps-phases.png)" in text
    csv = pd.read_csv(tmp_path / "out" / "results.csv")
    assert csv["phase_time_ms_forward_mean"].notna().all() and csv["memory_host_peak_rss_bytes"].min() == 500e6


def test_tool_table_sorted_by_per_step_overhead_with_every_mode(tmp_path: Path) -> None:
    sweep = tmp_path / "s"
    cost = {"native": 0.0, "traceml": 3.0, "torch_profiler": 8.0, "pyspy": 1.0, "wandb_offline": 0.5}

    def fig(mode: str, r: int) -> dict[str, Any]:
        ms = 100.0 + cost[mode] + 0.05 * r * (mode != "native")
        return {"step_ms": ms, "train_s": ms, "startup_s": 5.0 + cost[mode] / 4,
                "tool": None if mode == "native" else {"name": mode, "artifacts": [f"{sweep}/{mode}.out"],
                                                       "bytes": 1000 * (r + 1), "usable": r != 2,
                                                       "problem": None if r != 2 else "empty profile"}}

    for t in paired(fig, modes=tuple(cost), repeats=3, sweep=str(sweep)):
        write_trial(sweep, t)
    outcome = write_report([sweep], tmp_path / "out")
    text = outcome.report_path.read_text()
    assert text.index("## Tools compared") < text.index("**Verdicts**") < text.index("## Setup")
    table = text.split("## Tools compared", 1)[1].split("**Verdicts**")[0]
    rows = [l.split("|")[1].strip() for l in table.splitlines() if l.startswith("| ") and "---" not in l][1:]
    assert rows == ["wandb_offline", "pyspy", "traceml", "torch_profiler"]
    assert outcome.analysis.tool_ranking[0].startswith("wandb_offline vs native")
    assert "| torch_profiler | 3 | +8.100 [" in table and "peak memory Δ" in table
    assert "![tools](plots/tools-step-overhead.png)" in table
    assert (tmp_path / "out" / "plots" / "tools-step-overhead.png").read_bytes()[:4] == b"\x89PNG"
    out = text.split("## Tool output", 1)[1].split("## Failed trials")[0]
    assert "| cluster=local,model=tiny,stop=steps | pyspy | 2 | pyspy | **no** | 3,000 | empty profile |" in out
    assert out.count("| yes |") == 8


def test_foreign_script_metrics_feed_rows_and_unknowns_stay_unknown(tmp_path: Path) -> None:
    rate = {"native": [10.0, 10.2, 9.9, 10.1], "traceml": [9.5, 9.6, 9.4, 9.55]}

    def fig(mode: str, r: int) -> dict[str, Any]:
        sps = rate[mode][r - 1]
        return {"workload": None, "condition": {**COND, "workload": "script"}, "ranks": [], "steps_per_s": None,
                "samples_per_s": None, "step_time_ms": None, "startup_s": None, "train_s": None, "teardown_s": None,
                "wall_s": 60.0 + (3.0 if mode == "traceml" else 0.0) + 0.1 * r,
                "metrics": {"steps_per_s": {"value": sps, "unit": "steps/s", "source": "steps_per_s=([0-9.]+)"},
                            "tokens_per_s": {"value": sps * 512, "unit": "tokens/s", "source": "tok=([0-9.]+)"}}}

    trials = paired(fig, repeats=4)
    frame = frame_of(trials)
    a = analyze(frame)
    c = only(a)
    assert c.n_pairs == 4 and c.workload == "script"
    expect = [100 * (rate["native"][i] / rate["traceml"][i] - 1) for i in range(4)]
    assert [p.throughput_overhead_pct for p in c.pairs] == pytest.approx(expect)
    assert c.metrics["step_overhead_ms"].mean == pytest.approx(
        sum(1000 / rate["traceml"][i] - 1000 / rate["native"][i] for i in range(4)) / 4)
    assert c.metrics["startup_diff_s"].n == 0 and c.metrics["step_median_overhead_ms"].n == 0
    (tok,) = [r for r in c.rows if r.group == FigureGroup.metric]
    assert (tok.name, tok.unit) == ("tokens_per_s", "tokens/s")
    assert tok.pct is not None and tok.pct.mean == pytest.approx(sum(-e / (100 + e) * 100 for e in expect) / 4)
    text = render_report(a, frame, {}, ["/s"])
    line = next(l for l in text.splitlines() if l.startswith("| traceml | 4 (0) |"))
    assert line.count("unknown") == 5  # median step, start-up, teardown, fixed cost and its projection: never 0
    assert "| traceml | tokens_per_s (tokens/s) |" in text
    assert "Workload: `script`." in text
    write_results(frame, tmp_path)
    csv = pd.read_csv(tmp_path / "results.csv")
    assert csv["metric_tokens_per_s"].iloc[0] == pytest.approx(rate["native"][0] * 512)
    assert "tokens/s" in csv["metrics_json"].iloc[0]


def test_tflops_on_cuda_and_unknown_on_cpu() -> None:
    model = {"name": "seed_e2e", "batch_size": 256, "input_dim": 1024, "hidden_dim": 4096, "hidden_layers": 4,
             "num_classes": 10}

    def fig(mode: str, r: int) -> dict[str, Any]:
        t = make_trial()
        config = {**t["config"], "model": model, "cluster": {"name": "gpu_single", "nnodes": 1, "device": "cuda",
                                                             "precision": "bf16"}}
        return {"config": config, "step_ms": 20.0, "environment": {**t["environment"], "gpu_names": ["NVIDIA H200"]}}

    c = only(analyze(frame_of(paired(fig, repeats=2))))
    e = c.efficiency[1]
    flops = step_flops_for_model(model).total
    assert e.tflops == pytest.approx(achieved_tflops(flops, 20.0))
    assert e.fraction_of_peak == pytest.approx(fraction_of_peak(e.tflops, "NVIDIA H200", "bf16"))
    text = render_report(analyze(frame_of(paired(fig, repeats=2))), frame_of(paired(fig, repeats=2)), {}, ["/s"])
    assert f"traceml {e.tflops:.3g} TFLOP/s ({100 * e.fraction_of_peak:.2f} % of the NVIDIA H200 bf16 peak" in text
    cpu = only(analyze(frame_of(paired(lambda m, r: {}, repeats=2))))
    assert all(x.tflops is None and "CPU" in str(x.note) for x in cpu.efficiency)
    tr = only(analyze(frame_of(paired(lambda m, r: {"workload": "transformer"}, repeats=2))))
    assert tr.efficiency[0].tflops is None and "MLP only" in str(tr.efficiency[0].note)


def test_section_per_workload_and_pairs_never_mix_workloads() -> None:
    trials = []
    for w, sweep in (("mlp", "/a"), ("transformer", "/a")):
        trials += paired(lambda m, r, w=w: {"condition": {**COND, "workload": w}, "workload": w}, repeats=2, sweep=sweep)
    trials += paired(lambda m, r: {"workload": "convnet" if m == "traceml" else "mlp"}, repeats=2, sweep="/b")
    a = analyze(frame_of(trials))
    text = render_report(a, frame_of(trials), {}, ["/a", "/b"])
    assert "### Workload `mlp`" in text and "### Workload `transformer`" in text
    assert "#### Condition `cluster=local,model=tiny,stop=steps,workload=transformer`" in text
    mixed = [c for c in a.comparisons if c.condition_id == "cluster=local,model=tiny,stop=steps"][0]
    assert mixed.n_pairs == 0 and "sides ran different workloads (mlp, convnet)" in mixed.excluded[0].reason


def test_analysis_record_v5_and_earlier_versions_still_read(tmp_path: Path) -> None:
    payload = analysis_to_dict(analyze(frame_of(paired(lambda m, r: {}, repeats=3))))
    assert payload["schema_version"] == analysis_record.SCHEMA_VERSION and payload["comparisons"][0]["robust"]["step_overhead_ms"]["n"] == 3
    assert payload["job_hours"] == 1.0 and payload["comparisons"][0]["metrics"]["projected_overhead_pct"]["n"] == 3
    json.dumps(payload, allow_nan=False)
    assert payload["comparisons"][0]["switched"] is None  # these trials did not switch
    v4 = {**payload, "schema_version": 4,
          "comparisons": [{**c, "verdict": {k: v for k, v in c["verdict"].items() if k in ("status", "budget_pct", "reason",
                                                                                         "per_metric")}}
                          for c in payload["comparisons"]]}
    (tmp_path / "v4.json").write_text(json.dumps(v4))
    record, why = analysis_record.read_analysis_record(tmp_path / "v4.json")
    verdict = record["comparisons"][0]["verdict"]
    assert why is None and verdict["decided_by"] == [] and verdict["assumption_holds"] is None
    assert verdict["lower_bound_pct"] is None and verdict["status"] == payload["comparisons"][0]["verdict"]["status"]
    (tmp_path / "v5.json").write_text(json.dumps({**payload, "schema_version": 5}))
    record, why = analysis_record.read_analysis_record(tmp_path / "v5.json")
    assert why is None and record["versions"] is None and analysis_record.version_verdicts(record) is None
    v3 = {**payload, "schema_version": 3,
          "comparisons": [{k: v for k, v in c.items() if k not in ("switched", "switched_base")} for c in payload["comparisons"]]}
    (tmp_path / "v3.json").write_text(json.dumps(v3))
    record, why = analysis_record.read_analysis_record(tmp_path / "v3.json")
    assert why is None and record["comparisons"][0]["switched"] is None and record["comparisons"][0]["switched_base"] is None
    v2 = {k: v for k, v in payload.items() if k not in analysis_record.ADDED_IN_V3}
    v2["schema_version"] = 2
    v2["comparisons"] = [{**c, "excluded": [{"sweep_dir": "/s", "condition_id": "c", "repeat": 2, "mode": "traceml",
                                             "reason": "pair 2 disturbed (native trial: busy): re-run, not counted"},
                                            {"sweep_dir": "/s", "condition_id": "c", "repeat": 3, "mode": "traceml",
                                             "reason": "no native trial"}]} for c in payload["comparisons"]]
    (tmp_path / "v2.json").write_text(json.dumps(v2))
    record, why = analysis_record.read_analysis_record(tmp_path / "v2.json")
    assert why is None and record["job_hours"] is None
    assert [e["cause"] for e in record["comparisons"][0]["excluded"]] == ["rerun", "unpaired"]
    old = {k: v for k, v in payload.items() if k not in analysis_record.ADDED_IN_V2}
    old["schema_version"] = 1
    old["comparisons"] = [{k: v for k, v in c.items() if k not in analysis_record.COMPARISON_ADDED_IN_V2}
                          for c in payload["comparisons"]]
    (tmp_path / "a.json").write_text(json.dumps(old))
    record, why = analysis_record.read_analysis_record(tmp_path / "a.json")
    assert why is None and record["tool_ranking"] == [] and record["comparisons"][0]["workload"] == "mlp"


def test_v2_records_collected_with_flat_columns(tmp_path: Path) -> None:
    t = v2("traceml", 1, 0, 0, str(tmp_path), load={"n_cpus": 2, "own_cpus": [0, 1], "load1_start": 1.0,
                                                    "load1_end": 1.5, "foreign_cpu_s": 0.2, "steal_s": None,
                                                    "cpu_affinity": "auto"},
           metrics={"loss": {"value": 0.5, "unit": None, "source": "loss=(.*)"}},
           tool={"name": "traceml", "artifacts": ["a", "b"], "bytes": 12, "usable": True, "problem": None})
    write_trial(tmp_path, t)
    row = collect_trials([tmp_path]).frame.iloc[0]
    assert row["load_own_cpus"] == "0,1" and row["load_foreign_cpu_s"] == 0.2 and row["metric_loss"] == 0.5
    assert row["tool_usable"] == True and row["tool_artifacts"] == "a,b" and row["attempt_number"] == 1  # noqa: E712
    assert row["workload"] == "mlp" and row["timing"] == "step"
