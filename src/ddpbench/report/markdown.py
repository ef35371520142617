"""The report.md text: a pure function of the analysis, the trial table and the plot paths.

Sections: verdicts, setup (hardware, versions, command, config differences between modes),
method, headline table per condition, calibration, noise floor, details per comparison,
caveats, failed trials, skipped files, plots.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from ddpbench.analysis.coverage import CoverageGap, tool_step_coverage
from ddpbench.analysis.paired import Analysis, Comparison
from ddpbench.analysis.stats import PairedSummary

__all__ = ["command_line", "config_differences", "render_report"]


def _f(x: float, digits: int = 2, sign: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _ci(s: PairedSummary, unit: str = "", digits: int = 2, sign: bool = True) -> str:
    """``mean unit [lo, hi]``, or ``mean unit (n=1)`` when there is no interval."""
    if s.n == 0:
        return "n/a"
    head = f"{_f(s.mean, digits, sign)}{unit}"
    if not math.isfinite(s.ci_low):
        return f"{head} (n={s.n})"
    return f"{head} [{_f(s.ci_low, digits, sign)}, {_f(s.ci_high, digits, sign)}]"


def _pm(s: PairedSummary, digits: int = 2) -> str:
    if s.n == 0:
        return "n/a"
    if not math.isfinite(s.half_width):
        return _f(s.mean, digits)
    return f"{_f(s.mean, digits)} ± {_f(s.half_width, digits)}"


def _unique(values: Iterable[Any]) -> list[str]:
    out: dict[str, None] = {}
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)) or v == "":
            continue
        out.setdefault(str(v), None)
    return list(out)


def _col(frame: pd.DataFrame, name: str) -> list[Any]:
    return frame[name].tolist() if name in frame.columns else []


#: overrides the paired sweeper adds to every job; not part of what the user typed
SWEEPER_KEYS = ("pair_position", "sweep_name")


def command_line(frame: pd.DataFrame) -> str:
    """A ``ddpbench --multirun`` command equivalent to the trials' Hydra overrides (values in first-seen order)."""
    keys: "OrderedDict[str, dict[str, None]]" = OrderedDict()
    for text in _col(frame, "overrides_json"):
        try:
            overrides = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            continue
        for item in overrides or []:
            key, sep, value = str(item).partition("=")
            if sep and key not in SWEEPER_KEYS:
                keys.setdefault(key, {}).setdefault(value, None)
    parts = [f"{k}={','.join(v)}" for k, v in keys.items()]
    return "python3 -m ddpbench -m " + " ".join(parts) if parts else "(no overrides recorded)"


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = json.dumps(value, default=str)


def config_differences(frame: pd.DataFrame, baseline: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Resolved-config keys whose values differ between modes (one ok trial per mode, ``repeat`` ignored).

    Returns ``(modes, [(dotted key, [value per mode])])``.
    """
    per_mode: dict[str, dict[str, str]] = {}
    if "config_json" not in frame.columns:
        return [], []
    ok = frame[frame["status"] == "ok"] if "status" in frame.columns else frame
    for mode, text in zip(ok["mode"], ok["config_json"]):
        if mode in per_mode or not isinstance(text, str):
            continue
        try:
            cfg = json.loads(text)
        except ValueError:
            continue
        flat: dict[str, str] = {}
        _flatten("", cfg, flat)
        per_mode[str(mode)] = flat
    modes = sorted(per_mode, key=lambda m: (m != baseline, m))
    keys = sorted({k for flat in per_mode.values() for k in flat})
    rows = []
    for key in keys:
        if key in ("repeat", *SWEEPER_KEYS):
            continue
        values = [per_mode[m].get(key, "—") for m in modes]
        if len(set(values)) > 1:
            rows.append((key, values))
    return modes, rows


def _setup(frame: pd.DataFrame, baseline: str) -> list[str]:
    lines = ["## Setup", ""]
    hosts = sorted({h for v in _unique(_col(frame, "env_hostnames")) for h in v.split(",") if h})
    topo = _unique(
        f"{w} ranks = {n} node(s) × {p}"
        for w, n, p in zip(_col(frame, "world_size"), _col(frame, "nnodes"), _col(frame, "nproc_per_node"))
    )
    gpus = _unique(_col(frame, "env_gpu_names"))
    lines += [
        f"- Hardware: CPU {', '.join(_unique(_col(frame, 'env_cpu_model'))) or 'unknown'}"
        f" ({', '.join(_unique(_col(frame, 'env_cpu_count'))) or '?'} cores); "
        f"GPU {', '.join(gpus) if gpus else 'none'}; hosts {', '.join(hosts) or 'unknown'}",
        f"- Topology: {'; '.join(topo) or 'unknown'}",
    ]
    versions = []
    for label, col in (
        ("Python", "env_python"), ("torch", "env_torch"), ("CUDA", "env_cuda"), ("NCCL", "env_nccl"),
        ("traceml-ai", "env_traceml_ai"), ("ddpbench", "env_ddpbench"), ("git", "env_git_commit"),
        ("platform", "env_platform"),
    ):
        vals = _unique(_col(frame, col))
        if vals:
            versions.append(f"{label} {', '.join(vals)}")
    lines.append(f"- Versions: {'; '.join(versions) or 'unknown'}")
    lines += ["- Command (from the trials' overrides):", "", "```", command_line(frame), "```", ""]
    groups = frame.groupby("condition_id", sort=True) if "condition_id" in frame.columns else []
    for cond, sub in groups:
        modes, diffs = config_differences(sub, baseline)
        if not diffs:
            lines += [f"Config differences between modes in `{cond}`: none found (or one mode only).", ""]
            continue
        lines += [f"Config differences between modes in `{cond}`:", ""]
        lines.append("| key | " + " | ".join(modes) + " |")
        lines.append("|---|" + "---|" * len(modes))
        for key, values in diffs:
            lines.append(f"| `{key}` | " + " | ".join(f"`{v}`" for v in values) + " |")
        lines.append("")
    return lines


def _method(analysis: Analysis) -> list[str]:
    b = analysis.baseline
    return [
        "## Method",
        "",
        f"- Paired trials: each repeat runs every mode once, alternating order between repeats; a pair is "
        f"the `{b}` trial and a mode's trial with the same sweep dir, condition and repeat.",
        f"- Wall overhead = x.wall_s / {b}.wall_s − 1 (spawn to exit of the slowest node, what `time` reports).",
        f"- Throughput overhead = {b}.steps_per_s / x.steps_per_s − 1 (slowest rank's timed steps per second).",
        f"- Per-step overhead = x.step_time_ms.mean − {b}.step_time_ms.mean (ms, mean over ranks); "
        "startup/teardown differences in seconds.",
        f"- Across pairs: mean of the paired differences with a {analysis.methods['interval']}; "
        f"p-value from the {analysis.methods['test']} (H0: no difference); "
        f"minimum detectable effect (MDE) for {analysis.methods['mde']}.",
        f"- Verdict against the {analysis.budget_pct:g} % budget, on wall and throughput overhead: "
        "`within` when both intervals lie below it, `over` when either lies wholly above it, else `inconclusive`.",
        "- Walls and throughputs of each side are shown as mean ± t half-width over repeats.",
        "",
    ]


def _headline(comparisons: Sequence[Comparison]) -> list[str]:
    base = comparisons[0].baseline if comparisons else "native"
    lines = [
        f"| mode | pairs (excl.) | {base} wall s | mode wall s | wall overhead % | "
        "throughput overhead % | per-step Δ ms | startup Δ s | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        verdict = c.verdict.status if c.role == "tool" else {"aa": "A/A (noise floor)", "calibration": "calibration"}[c.role]
        lines.append(
            f"| {c.mode} | {c.n_pairs} ({c.n_excluded}) | {_pm(c.sides['base_wall_s'])} | "
            f"{_pm(c.sides['mode_wall_s'])} | {_ci(c.metrics['wall_overhead_pct'])} | "
            f"{_ci(c.metrics['throughput_overhead_pct'])} | {_ci(c.metrics['step_overhead_ms'], digits=3)} | "
            f"{_ci(c.metrics['startup_diff_s'])} | {verdict} |"
        )
    return lines + [""]


def calibration_line(c: Comparison) -> str:
    """One sentence: injected vs recovered per cost, and whether all are within tolerance."""
    if c.calibration is None:
        return f"Calibration ({c.label}): no `config.inject` values recorded."
    parts = []
    for item in c.calibration.items:
        if item.within_tolerance is None:
            parts.append(f"{item.name} not injected (measured {_f(item.recovered, 3, True)} {item.unit})")
        else:
            parts.append(
                f"{item.name} injected {_f(item.injected, 3)} {item.unit}, recovered {_f(item.recovered, 3)} "
                f"{item.unit} ({_f(item.error_pct, 1, True)} %)"
            )
    ok = c.calibration.all_within
    tail = (
        f"all within {c.calibration.tolerance_pct:g} %" if ok
        else "nothing injected" if ok is None
        else f"NOT all within {c.calibration.tolerance_pct:g} %"
    )
    return f"Calibration ({c.label}, {c.n_pairs} pairs): " + "; ".join(parts) + f" — {tail}."


def _details(c: Comparison) -> list[str]:
    lines = [f"### {c.label}", ""]
    if c.role == "tool":
        lines.append(f"Verdict: **{c.verdict.status}** — {c.verdict.reason}.")
        lines.append("")
    lines += [
        "| metric | mean | median | min | max | n | 95 % CI | p | MDE (80 %) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    units = {"pct": "%", "ms": "ms", "_s": "s"}
    for name, s in c.metrics.items():
        unit = next((u for k, u in units.items() if name.endswith(k)), "")
        digits = 3 if unit == "ms" else 2
        ci = f"[{_f(s.ci_low, digits, True)}, {_f(s.ci_high, digits, True)}]" if math.isfinite(s.ci_low) else "n/a"
        p = "n/a" if not math.isfinite(s.p_value) else (f"{s.p_value:.2g}" if s.p_value >= 1e-4 else "<1e-4")
        lines.append(
            f"| {name} ({unit}) | {_f(s.mean, digits, True)} | {_f(s.median, digits, True)} | {_f(s.min, digits, True)} | "
            f"{_f(s.max, digits, True)} | {s.n} | {ci} | {p} | {_f(s.mde, digits)} |"
        )
    lines.append("")
    order = "; ".join(
        f"{o.metric}: {c.mode} first {_f(o.mean_mode_first, 2, True)} % (n={o.n_mode_first}), "
        f"second {_f(o.mean_mode_second, 2, True)} % (n={o.n_mode_second}), difference {_f(o.difference, 2, True)} pp"
        for o in c.order_effects
    )
    lines.append(f"- Order effect: {order}.")
    for st in c.stability:
        lines.append(
            f"- Stability of `{st.mode}` ({st.n_trials} trials): step-time CV within trials "
            f"{_f(st.step_time_cv_within_pct)} %, across trials {_f(st.step_time_cv_across_pct)} %; "
            f"throughput CV across trials {_f(st.throughput_cv_pct)} %."
        )
    if c.host_mismatch:
        lines.append(f"- Pairs whose sides ran on different hosts: {', '.join(c.host_mismatch)}.")
    for e in c.excluded:
        lines.append(f"- Excluded: repeat {e.repeat} in {e.sweep_dir}: {e.reason}.")
    if c.calibration is not None:
        lines.append(f"- {calibration_line(c)}")
    lines.append("")
    return lines


def _fixed_cost_split(c: Comparison) -> tuple[float, float, float, float] | None:
    """(fixed s, wall difference s, start-up Δ s, teardown Δ s) when fixed costs are most of a positive wall difference."""
    try:
        diff = c.sides["mode_wall_s"].mean - c.sides["base_wall_s"].mean
        startup = c.metrics["startup_diff_s"].mean
        teardown = c.metrics["teardown_diff_s"].mean
    except KeyError:
        return None
    fixed = startup + teardown
    if not all(math.isfinite(v) for v in (diff, fixed)) or diff <= 0 or fixed < 0.5 * diff:
        return None
    return fixed, diff, startup, teardown


def _caveats(analysis: Analysis, gaps: Sequence[CoverageGap] = ()) -> list[str]:
    out: list[str] = []
    for gap in gaps:
        out.append(
            f"{gap.mode} [{gap.condition_id}] repeat {gap.repeat}: the tool analysed {gap.steps_analyzed} steps of the "
            f"{gap.steps_run} the workload ran (warmup + timed); its step instrumentation missed steps, so this "
            "trial may understate the tool's cost."
        )
    budget = analysis.budget_pct
    tools = [c for c in analysis.comparisons if c.role == "tool"]
    for c in analysis.comparisons:
        if c.stop_kind and "duration" in str(c.stop_kind) and c.role != "aa":
            out.append(
                f"{c.label}: duration stop — both modes train for the same time, so wall overhead reflects "
                "fixed costs only (startup, teardown); the per-step cost shows as throughput overhead."
            )
    for c in tools:
        split = _fixed_cost_split(c)
        if split is not None:
            fixed, diff, startup, teardown = split
            t = c.metrics["throughput_overhead_pct"]
            out.append(
                f"{c.label}: {_f(fixed, 2)} s of the {_f(diff, 2)} s wall difference is fixed per-trial cost "
                f"(start-up {_f(startup, 2, True)} s, teardown {_f(teardown, 2, True)} s), so the wall overhead "
                f"shrinks as trials get longer (`stop.steps`); the per-step cost is the throughput overhead "
                f"({_f(t.mean, 2, True)} %)."
            )
    for c in tools:
        if c.verdict.status == "inconclusive":
            t = c.metrics["throughput_overhead_pct"]
            out.append(
                f"{c.label}: inconclusive — an interval straddles the {budget:g} % budget or n < 2 "
                f"(throughput MDE {_f(t.mde)} %); run more pairs."
            )
    for c in analysis.comparisons:
        if c.excluded:
            reasons = sorted({e.reason for e in c.excluded})
            out.append(f"{c.label}: {c.n_excluded} pair(s) excluded ({'; '.join(reasons)}).")
        if c.host_mismatch:
            out.append(f"{c.label}: {len(c.host_mismatch)} pair(s) ran their two sides on different hosts.")
        if c.n_pairs and c.role != "aa":
            t = c.metrics["throughput_overhead_pct"]
            for o in c.order_effects[:1]:
                if o.n_mode_first and o.n_mode_second and math.isfinite(t.half_width) and abs(o.difference) > max(t.half_width, 1e-9):
                    out.append(
                        f"{c.label}: order effect — throughput overhead differs by {_f(o.difference, 2, True)} pp "
                        f"between running first and second, more than the interval half-width {_f(t.half_width)} pp."
                    )
    if analysis.noise_floors:
        for c in tools:
            if c.noise_floor_pct is None:
                continue
            t = c.metrics["throughput_overhead_pct"]
            small = math.isfinite(t.mean) and abs(t.mean) <= c.noise_floor_pct
            out.append(
                f"{c.label}: noise floor ±{_f(c.noise_floor_pct)} % ({c.noise_floor_source})"
                + (f"; the throughput overhead {_f(t.mean, 2, True)} % is within it, not resolvable." if small else ".")
            )
    elif tools:
        out.append(
            f"No A/A comparison (`{analysis.baseline}` vs `{analysis.baseline}_aa`) in this report: "
            "the noise floor of this machine is unknown."
        )
    for c in analysis.comparisons:
        if c.calibration is not None and c.calibration.all_within is False:
            out.append(f"{c.label}: calibration did not recover the injected cost within tolerance; distrust small overheads.")
    if analysis.failed_trials:
        out.append(f"{len(analysis.failed_trials)} trial(s) did not finish ok (listed below).")
    return ["## Caveats", ""] + ([f"- {line}" for line in out] or ["- None."]) + [""]


def render_report(
    analysis: Analysis,
    frame: pd.DataFrame,
    plots: Mapping[str, Mapping[str, str]],
    sweep_dirs: Sequence[str],
    skipped: Sequence[tuple[str, str]] = (),
    generated_at: str = "",
    ddpbench_version: str = "",
) -> str:
    """The whole report.md.

    ``plots`` maps condition_id → {plot name → path relative to the report}.
    """
    comps = list(analysis.comparisons)
    tools = [c for c in comps if c.role == "tool"]
    title = ", ".join(sorted({c.mode for c in tools})) or "ddpbench"
    lines = [
        f"# Overhead report: {title} vs {analysis.baseline}",
        "",
        f"Generated {generated_at} by ddpbench {ddpbench_version} from {len(sweep_dirs)} sweep dir(s): "
        + ", ".join(f"`{d}`" for d in sweep_dirs)
        + f". {analysis.n_trials} trials ({analysis.n_ok} ok), {sum(c.n_pairs for c in comps)} pairs used, "
        f"{sum(c.n_excluded for c in comps)} excluded, {len(skipped)} file(s) skipped.",
        "",
    ]
    if tools:
        lines += ["**Verdicts** (budget " + f"{analysis.budget_pct:g} %):", ""]
        for c in tools:
            t = c.metrics["throughput_overhead_pct"]
            w = c.metrics["wall_overhead_pct"]
            lines.append(
                f"- {c.label}: **{c.verdict.status}** — throughput overhead {_ci(t, ' %')}, wall overhead {_ci(w, ' %')}"
            )
        lines.append("")
    for c in comps:
        if c.role == "calibration":
            lines += [calibration_line(c), ""]
    for c in comps:
        if c.role == "aa":
            lines += [
                f"Noise floor ({c.label}): throughput-overhead interval {_ci(c.metrics['throughput_overhead_pct'], ' %')}, "
                f"half-width ±{_f(c.metrics['throughput_overhead_pct'].half_width)} %; per-step "
                f"{_ci(c.metrics['step_overhead_pct'], ' %')}.",
                "",
            ]
    lines += _setup(frame, analysis.baseline)
    lines += _method(analysis)
    lines += ["## Results", ""]
    conditions = list(OrderedDict.fromkeys([c.condition_id for c in comps] + list(plots)))
    for cond in conditions:
        cc = [c for c in comps if c.condition_id == cond]
        lines += [f"### Condition `{cond}`", ""]
        if cc:
            lines += _headline(cc)
        for name, rel in plots.get(cond, {}).items():
            lines += [f"![{name}]({rel})", ""]
    if not comps:
        lines += [f"No pairs could be formed (no mode other than `{analysis.baseline}` with an ok baseline).", ""]
    lines += ["## Details", ""]
    for c in comps:
        lines += _details(c)
    lines += _caveats(analysis, tool_step_coverage(frame))
    lines += ["## Failed trials", ""]
    if analysis.failed_trials:
        lines += ["| condition | mode | repeat | status | exit code | error | file |", "|---|---|---|---|---|---|---|"]
        for t in analysis.failed_trials:
            err = (t.error or "").replace("|", "\\|")
            lines.append(
                f"| {t.condition_id} | {t.mode} | {t.repeat} | {t.status} | {t.exit_code if t.exit_code is not None else '—'} "
                f"| {err} | `{t.source_path}` |"
            )
    else:
        lines.append("None.")
    lines += ["", "## Skipped files", ""]
    if skipped:
        lines += [f"- `{p}`: {reason}" for p, reason in skipped]
    else:
        lines.append("None.")
    lines.append("")
    return "\n".join(lines)
