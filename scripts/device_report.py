"""Helpers of scripts/device-check.sh: size the next sweep to the time left, and summarise a finished sweep.

  python3 scripts/device_report.py plan PROFILE LEFT_S RESULTS_ROOT SPEC [SPEC...] [--timings DIR]
  python3 scripts/device_report.py summary LABEL SWEEP_DIR STATUS [--reference-ms MS]

``plan`` prints ``PAIRS SEC CAP_S`` for the first SPEC (``label:pairs:sec:min_sec:mode+mode...[:hf]``; the others
are the sweeps still to come, whose smallest sizes it leaves time for), or ``0 0 0 <why>`` when even its smallest
size does not fit. A trial's own overhead (start-up, teardown, the driver's gap) is what the sweeps so far measured
per mode (``wall_s - train_s`` in every ``results.csv`` below RESULTS_ROOT), else the profile's assumption scaled by
how the measured native trials compare with it, and a sweep's own time (driver, report) is what the sweeps so far
took beyond their trials (``--timings``; docs/gpu.md has the arithmetic). ``summary`` prints one line per
sweep: trials, GPU, every comparison's per-step figure with its interval and how it compares with the 1 % goal, the
within-trial figure, where the step's time lands (host, GPU busy, GPU idle per mode), the start-up's parts, the
calibration by side, achieved TFLOP/s. Standard library only, except ``summary`` (``ddpbench.analysis.flops``
from the installed wheel). Bad input: one line ``device-check: error: ...`` on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

PROG = "device-check"

#: assumed overhead of one trial beyond its timed seconds (start-up + teardown), s, before any was measured:
#: the H200's native trials took 12-20 s to start and TraceML's 21-31 s with the 4.3 GB data set (2026-12-04);
#: the data set is now drawn in parallel chunks and the reference runs 65,536 samples (docs/gpu.md)
OVERHEAD_S = {"gpu": {"native": 12.0, "tool": 22.0}, "cpu": {"native": 10.0, "tool": 20.0}}
#: a framework Trainer's trial starts slower (transformers' import, the Trainer's set-up), s
FRAMEWORK_EXTRA_S = {"gpu": 6.0, "cpu": 8.0}
#: modes that run no tool (the baseline, its A/A twin, the calibration modes); others are tools
NO_TOOL = ("native", "native_aa", "inject", "inject_device")
#: inject's start-up and teardown sleeps (inject.startup_s + teardown_s), s
INJECT_SLEEPS_S = 1.5
#: the driver's own time between two trials, s; and per sweep: its start, the report at its end, s
GAP_S, SWEEP_S = 1.0, 10.0
#: a sweep's bound: its planned time times this, plus SLACK_S (within the time left): room for trials slower than
#: planned before anything was measured; the sweeps after it are planned on what is left
CAP_FACTOR, SLACK_S = 2.0, 20.0
#: the goal for a tool's per-step cost on the reference: an interval half-width of at most this % of the native step
GOAL_HALF_WIDTH_PCT = 1.0


class ReportError(Exception):
    """Bad input: one ``device-check: error:`` line, exit status 2."""


# ---------------------------------------------------------------------------------------------------- plan

@dataclass(frozen=True)
class Spec:
    """One sweep of the plan: its label, the pairs and timed seconds asked for, the fewest seconds it may shrink to,
    its modes (each trial once per repeat) and whether it trains with a framework Trainer."""

    label: str
    pairs: int
    sec: int
    min_sec: int
    modes: tuple[str, ...]
    framework: bool = False


def parse_spec(text: str) -> Spec:
    """``label:pairs:sec:min_sec:mode+mode...[:hf]`` -> :class:`Spec`."""
    parts = text.split(":")
    try:
        label, pairs, sec, min_sec, modes = parts[:5]
        spec = Spec(label, int(pairs), int(sec), int(min_sec), tuple(m for m in modes.split("+") if m),
                    framework=parts[5:] == ["hf"])
    except ValueError:
        raise ReportError(f"bad sweep spec {text!r} (label:pairs:sec:min_sec:mode+mode...[:hf])") from None
    if spec.pairs < 0 or spec.min_sec < 1 or spec.sec < spec.min_sec or not spec.modes or len(parts) > 6:
        raise ReportError(f"bad sweep spec {text!r} (pairs >= 0, 1 <= min_sec <= sec, one mode or more)")
    return spec


def _float(value: Any) -> Optional[float]:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def measured_overheads(root: Path) -> dict[tuple[str, bool], float]:
    """Per (mode, framework workload): the mean ``wall_s - train_s`` of the ok trials of every results.csv below root."""
    seen: dict[tuple[str, bool], list[float]] = {}
    for path in sorted(root.glob("*/results.csv")) if root.is_dir() else []:
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                wall, train = _float(row.get("wall_s")), _float(row.get("train_s"))
                if row.get("status") == "ok" and wall is not None and train is not None:
                    key = (str(row.get("mode")), row.get("workload") in ("hf_trainer", "lightning"))
                    seen.setdefault(key, []).append(wall - train)
    return {key: sum(values) / len(values) for key, values in seen.items()}


def overhead(mode: str, framework: bool, profile: str, measured: dict[tuple[str, bool], float]) -> float:
    """One trial's overhead beyond its timed seconds, s: measured, else the assumption scaled to this machine."""
    if (mode, framework) in measured:
        return measured[(mode, framework)]
    assumed = OVERHEAD_S[profile]["native" if mode in NO_TOOL else "tool"] + (FRAMEWORK_EXTRA_S[profile] if framework else 0.0)
    native = measured.get(("native", False))
    scale = native / OVERHEAD_S[profile]["native"] if native else 1.0
    return assumed * max(0.5, scale) + (INJECT_SLEEPS_S if mode == "inject" else 0.0)


def measured_sweep_s(root: Path, timings: Optional[Path]) -> float:
    """A sweep's own time beyond its trials (the driver's start, the gaps, the report), s: from the sweeps so far
    (``timings/<label>``: the sweep's elapsed s, less its trials' ``wall_s``), at least :data:`SWEEP_S`."""
    own = []
    for path in sorted(timings.iterdir()) if timings is not None and timings.is_dir() else []:
        elapsed = _float(path.read_text().strip())
        results = root / path.name / "results.csv"
        if elapsed is None or not results.is_file():
            continue
        with results.open(newline="") as fh:
            walls = [_float(r.get("wall_s")) for r in csv.DictReader(fh)]
        own.append(elapsed - sum(w for w in walls if w is not None) - GAP_S * len(walls))
    return max(SWEEP_S, sum(own) / len(own)) if own else SWEEP_S


def cost(spec: Spec, pairs: int, sec: int, profile: str, measured: dict[tuple[str, bool], float],
         sweep_s: float = SWEEP_S) -> float:
    """The sweep's expected wall time at ``pairs`` and ``sec``, s."""
    per_repeat = sum(overhead(m, spec.framework, profile, measured) + sec + GAP_S for m in spec.modes)
    return sweep_s + pairs * per_repeat


def plan_next(specs: list[Spec], left_s: float, profile: str, measured: dict[tuple[str, bool], float],
              sweep_s: float = SWEEP_S) -> tuple[int, int, int, str]:
    """(pairs, sec, cap_s, why) of the first spec: its asked size shrunk (seconds first, then pairs) until it fits in
    the time left after the smallest sizes of the later sweeps; failing that, its smallest size in the whole time
    left (earlier sweeps come first); else (0, 0, 0, why)."""
    first, later = specs[0], specs[1:]
    if first.pairs == 0:
        return 0, 0, 0, "not asked (0 pairs)"
    reserve = sum(cost(s, min(s.pairs, 1), s.min_sec, profile, measured, sweep_s) for s in later if s.pairs)
    sizes = [(pairs, sec) for pairs in range(first.pairs, 0, -1) for sec in range(first.sec, first.min_sec - 1, -1)]
    smallest = [(pairs, first.min_sec) for pairs in range(first.pairs, 0, -1)]
    for budget, candidates in ((left_s - reserve, sizes), (left_s, smallest)):
        for pairs, sec in candidates:
            planned = cost(first, pairs, sec, profile, measured, sweep_s)
            if planned <= budget:
                return pairs, sec, int(min(left_s, planned * CAP_FACTOR + SLACK_S)), ""
    need = cost(first, 1, first.min_sec, profile, measured, sweep_s)
    return 0, 0, 0, f"skipped: {left_s:.0f}s left, its smallest size needs ~{need:.0f}s"


# ---------------------------------------------------------------------------------------------------- summary

def _fmt(summary: Optional[dict[str, Any]], unit: str, digits: int = 2) -> str:
    if not summary or summary.get("mean") is None:
        return "n/a"
    text = f"{summary['mean']:+.{digits}f}{unit}"
    half = summary.get("half_width")
    return text + (f" ± {half:.{digits}f}" if half is not None else " (no interval)")


def _mean(values: Iterable[Optional[float]]) -> Optional[float]:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def throughput_line(rows: list[dict[str, str]], baseline: str) -> str:
    """Achieved TFLOP/s of the baseline mode's mean step and its fraction of the GPU's peak."""
    from ddpbench.analysis.flops import achieved_tflops, peak_tflops, step_flops_for_model

    base = [r for r in rows if r.get("mode") == baseline and r.get("status") == "ok" and r.get("step_time_ms_mean")]
    if not base:
        return "TFLOP/s n/a (no ok baseline trial)"
    config = json.loads(base[0]["config_json"])
    step_ms = _mean(_float(r["step_time_ms_mean"]) for r in base)
    assert step_ms is not None
    if base[0].get("workload") not in ("mlp", "", None):
        return f"{baseline} {step_ms:.3f} ms/step (TFLOP/s counted for the MLP only)"
    try:
        flops = step_flops_for_model(config["model"])
    except (KeyError, TypeError, ValueError):
        return f"{baseline} {step_ms:.3f} ms/step (TFLOP/s n/a: no model sizes in the config)"
    achieved = achieved_tflops(flops.total, step_ms)
    gpu = (base[0].get("env_gpu_names") or "").split(",")[0]
    precision = str(config.get("cluster", {}).get("precision", ""))
    text = f"{baseline} {step_ms:.3f} ms/step = {achieved:.3g} TFLOP/s ({flops.total / 1e9:.4g} GFLOP/step/rank)"
    if not gpu:
        return text + ", no GPU"
    peak = peak_tflops(gpu, precision) if precision in ("fp16", "bf16", "fp32") else None
    return text + (f" = {100 * achieved / peak:.1f} % of {gpu}'s {peak:g} {precision} peak" if peak
                   else f" on {gpu} (peak for {precision} not in the table)")


def _ok(rows: list[dict[str, str]], mode: str) -> list[dict[str, str]]:
    return [r for r in rows if r.get("mode") == mode and r.get("status") == "ok"]


def where_line(rows: list[dict[str, str]], modes: list[str]) -> str:
    """Per mode: mean host step, GPU busy and GPU idle ms per step (the first mode's as the reference for Δ)."""
    parts, first = [], None
    for mode in modes:
        mine = _ok(rows, mode)
        figures = [_mean(_float(r.get(c)) for r in mine)
                   for c in ("step_time_ms_mean", "gpu_busy_ms_mean", "gpu_idle_ms_mean")]
        if figures[0] is None:
            continue
        if figures[1] is None:
            parts.append(f"{mode} host {figures[0]:.3f}")
            continue
        if first is None:
            first = figures
            parts.append(f"{mode} host {figures[0]:.3f} / GPU-busy {figures[1]:.3f} / GPU-idle {figures[2]:.3f}")
        else:
            d = [f - b for f, b in zip(figures, first)]  # type: ignore[operator]
            parts.append(f"{mode} host {figures[0]:.3f} ({d[0]:+.3f}) / GPU-busy {figures[1]:.3f} ({d[1]:+.3f}) / "
                         f"GPU-idle {figures[2]:.3f} ({d[2]:+.3f})")
    if not parts:
        return ""
    gpu = any(_float(r.get("gpu_busy_ms_mean")) is not None for r in rows)
    return "where, ms/step: " + "; ".join(parts) + ("" if gpu else " (no GPU split on CPU)")


#: start-up parts shown in the summary, in order (collected as startup_<key>_s)
STARTUP_SHOWN = (("before_rank", "before rank"), ("torch_import", "torch"), ("tool_init", "tool"),
                 ("device_init", "cuda"), ("process_group", "pg"), ("model", "model"), ("data", "data"),
                 ("injected", "injected"), ("warmup", "warmup"))


def startup_line(rows: list[dict[str, str]], modes: list[str]) -> str:
    """Per mode: mean start-up s and its largest parts."""
    parts = []
    for mode in modes:
        mine = _ok(rows, mode)
        total = _mean(_float(r.get("startup_s")) for r in mine)
        if total is None:
            continue
        split = [(name, _mean(_float(r.get(f"startup_{key}_s")) for r in mine)) for key, name in STARTUP_SHOWN]
        shown = ", ".join(f"{name} {v:.1f}" for name, v in split if v is not None and v >= 0.05)
        parts.append(f"{mode} {total:.1f} s" + (f" ({shown})" if shown else ""))
    return "start-up: " + "; ".join(parts) if parts else ""


def comparison_text(c: dict[str, Any], reference_ms: Optional[float]) -> str:
    """One comparison: per-step with its interval against the goal, throughput, the within-trial figure, verdict."""
    m = c.get("metrics", {})
    step = m.get("step_overhead_ms") or {}
    sides = c.get("sides", {})
    base_ms = (sides.get("base_step_ms") or {}).get("mean")
    text = (f"{c['mode']} vs {c['baseline']} (n={c.get('n_pairs')}, {c.get('stop_kind')}): per-step "
            f"{_fmt(step, ' ms', 3)}")
    if base_ms and step.get("mean") is not None:
        text += f" ({100 * step['mean'] / base_ms:+.1f} % of the {base_ms:.3f} ms step"
        half = step.get("half_width")
        if half is not None and c.get("role") == "tool":
            pct = 100 * half / base_ms
            reached = "reached" if pct <= GOAL_HALF_WIDTH_PCT else "not reached"
            text += f"; half-width {pct:.2f} %, goal <= {GOAL_HALF_WIDTH_PCT:g} %: {reached}"
        text += ")"
    if reference_ms is not None and c.get("role") == "tool" and step.get("ci_low") is not None:
        inside = step["ci_low"] <= reference_ms <= step["ci_high"]
        text += f", seed script's +{reference_ms:g} ms {'inside' if inside else 'OUTSIDE'} its interval"
    text += f", throughput {_fmt(m.get('throughput_overhead_pct'), '%')}"
    switched = c.get("switched")
    if switched:
        off = switched.get("off_step_ms") or 0.0
        half = (switched["ci_high_ms"] - switched["ci_low_ms"]) / 2 if switched.get("ci_low_ms") is not None else None
        text += (f", within-trial {switched['overhead_ms']:+.3f} ms" + (f" ± {half:.3f}" if half is not None else "")
                 + f" ({switched.get('quads')} quads, {switched.get('what')}"
                 + (f"; half-width {100 * half / off:.2f} % of the step" if half is not None and off else "") + ")")
    if c.get("role") == "tool":  # the report's combined rule (docs/analysis.md, "Verdict"), as on the CPU
        verdict = c.get("verdict", {})
        decided = ", ".join(verdict.get("decided_by") or [])
        text += f", verdict {verdict.get('status')}" + (f" (decided by {decided})" if decided else "")
    return text


def calibration_text(c: dict[str, Any]) -> str:
    """The calibration items of one comparison with their side and whether the loop lets their figure show them."""
    parts = []
    for item in (c.get("calibration") or {}).get("items", []):
        if not item.get("injected"):
            continue
        verdict = ("within" if item.get("within_tolerance") else "OUTSIDE") if item.get("within_tolerance") is not None \
            else "not judged"
        parts.append(f"{item['name']} [{item.get('side', 'host')}] injected {item['injected']:g} {item['unit']} "
                     f"recovered {item['recovered']:.3f} ({verdict}{'' if item.get('knowable') is not False else ': hides in this loop'})")
    return f"calibration {c['mode']}: " + "; ".join(parts) if parts else ""


def _differing_keys(conditions: list[dict[str, Any]]) -> list[str]:
    """The condition keys whose values differ between the comparisons of a sweep (what tells them apart)."""
    keys = list(dict.fromkeys(k for c in conditions for k in c))
    return [k for k in keys if len({json.dumps(c.get(k), sort_keys=True) for c in conditions}) > 1]


def summary_line(label: str, sweep_dir: Path, status: str, reference_ms: Optional[float] = None) -> str:
    """One line per sweep (see the module doc)."""
    analysis_path, results_path = sweep_dir / "analysis.json", sweep_dir / "results.csv"
    if not analysis_path.is_file() or not results_path.is_file():
        return f"{PROG}: {label} [{status}] no report in {sweep_dir}"
    analysis = json.loads(analysis_path.read_text())
    with results_path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    gpus = sorted({g for r in rows for g in (r.get("env_gpu_names") or "").split(",") if g}) or ["no GPU"]
    syncs = sorted({r.get("host_sync") or "?" for r in rows})
    parts = [f"{PROG}: {label} [{status}] {analysis.get('n_ok')}/{analysis.get('n_trials')} trials ok, "
             f"{', '.join(gpus)}, host_sync={'/'.join(syncs)}"]
    baseline = str(analysis.get("baseline", "native"))
    comparisons = analysis.get("comparisons", [])
    conditions = list(dict.fromkeys(str(c.get("condition_id")) for c in comparisons))
    differing = _differing_keys([c.get("condition") or {} for c in comparisons])
    for cond in conditions:
        mine = [c for c in comparisons if str(c.get("condition_id")) == cond]
        label = ",".join(f"{k}={(mine[0].get('condition') or {}).get(k)}" for k in differing)
        texts = []
        for c in mine:
            texts.append(calibration_text(c) if c.get("role") == "calibration" else comparison_text(c, reference_ms))
            if c.get("role") == "tool" and c.get("switched_base"):
                floor = c["switched_base"]
                if floor.get("ci_low_ms") is not None:
                    half = (floor["ci_high_ms"] - floor["ci_low_ms"]) / 2
                    texts.append(f"no-op switch ({baseline}) {floor['overhead_ms']:+.3f} ± {half:.3f} ms")
        modes = [baseline] + [c["mode"] for c in mine if c["mode"] != baseline]
        texts.append(where_line([r for r in rows if r.get("condition_id") == cond], modes))
        parts += [f"[{label}] {t}" if label else t for t in texts if t]
    modes = [baseline] + list(dict.fromkeys(c["mode"] for c in comparisons if c["mode"] != baseline))
    parts.append(startup_line(rows, modes))
    parts.append(throughput_line(rows, baseline))
    return " | ".join(p for p in parts if p)


# ---------------------------------------------------------------------------------------------------- main

def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="size the next sweep to the time left")
    p.add_argument("profile", choices=sorted(OVERHEAD_S))
    p.add_argument("left_s", type=float)
    p.add_argument("results_root")
    p.add_argument("specs", nargs="+")
    p.add_argument("--timings", default=None, help="a folder of <label> files: each sweep's elapsed s so far")
    p = sub.add_parser("summary", help="one summary line of a finished sweep")
    p.add_argument("label")
    p.add_argument("sweep_dir")
    p.add_argument("status")
    p.add_argument("--reference-ms", type=float, default=None, help="a published per-step figure to check")
    args = parser.parse_args(argv)
    try:
        if args.command == "plan":
            specs = [parse_spec(s) for s in args.specs]
            root = Path(args.results_root)
            sweep_s = measured_sweep_s(root, Path(args.timings) if args.timings else None)
            pairs, sec, cap, why = plan_next(specs, args.left_s, args.profile, measured_overheads(root), sweep_s)
            print(f"{pairs} {sec} {cap}" + (f" {why}" if why else ""))
        else:
            print(summary_line(args.label, Path(args.sweep_dir), args.status, args.reference_ms))
    except ReportError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
