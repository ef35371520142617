"""The report.md text: a pure rendering of the analysis, its provenance and caveats, and the plot paths.

Sections: verdicts, setup (hardware, versions, command, config differences between modes),
method, headline table per condition, calibration, noise floor, details per comparison,
caveats, failed trials, skipped files, plots. Every figure, unit, caveat and provenance fact comes
from :mod:`ddpbench.analysis`; this module only lays them out.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Mapping, Sequence

import pandas as pd

from ddpbench.analysis.caveats import caveats, fmt
from ddpbench.analysis.coverage import tool_step_coverage
from ddpbench.analysis.paired import METRIC_UNITS, Analysis, Comparison
from ddpbench.analysis.provenance import Provenance, provenance
from ddpbench.analysis.stats import PairedSummary

__all__ = ["calibration_line", "render_report"]


def _ci(s: PairedSummary, unit: str = "", digits: int = 2, sign: bool = True) -> str:
    """``mean unit [lo, hi]``, or ``mean unit (n=1)`` when there is no interval."""
    if s.n == 0:
        return "n/a"
    head = f"{fmt(s.mean, digits, sign)}{unit}"
    if not math.isfinite(s.ci_low):
        return f"{head} (n={s.n})"
    return f"{head} [{fmt(s.ci_low, digits, sign)}, {fmt(s.ci_high, digits, sign)}]"


def _pm(s: PairedSummary, digits: int = 2) -> str:
    if s.n == 0:
        return "n/a"
    if not math.isfinite(s.half_width):
        return fmt(s.mean, digits)
    return f"{fmt(s.mean, digits)} ± {fmt(s.half_width, digits)}"


def _setup(prov: Provenance) -> list[str]:
    lines = ["## Setup", ""]
    lines += [
        f"- Hardware: CPU {', '.join(prov.cpu_models) or 'unknown'}"
        f" ({', '.join(prov.cpu_counts) or '?'} cores); "
        f"GPU {', '.join(prov.gpu_names) if prov.gpu_names else 'none'}; hosts {', '.join(prov.hostnames) or 'unknown'}",
        f"- Topology: {'; '.join(prov.topologies) or 'unknown'}",
    ]
    versions = [f"{label} {', '.join(values)}" for label, values in prov.versions]
    lines.append(f"- Versions: {'; '.join(versions) or 'unknown'}")
    lines += ["- Command (from the trials' overrides):", "", "```", prov.command, "```", ""]
    for cond, (modes, diffs) in prov.config_differences.items():
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
            parts.append(f"{item.name} not injected (measured {fmt(item.recovered, 3, True)} {item.unit})")
        else:
            parts.append(
                f"{item.name} injected {fmt(item.injected, 3)} {item.unit}, recovered {fmt(item.recovered, 3)} "
                f"{item.unit} ({fmt(item.error_pct, 1, True)} %)"
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
    for name, s in c.metrics.items():
        unit = METRIC_UNITS.get(name, "")
        digits = 3 if unit == "ms" else 2
        ci = f"[{fmt(s.ci_low, digits, True)}, {fmt(s.ci_high, digits, True)}]" if math.isfinite(s.ci_low) else "n/a"
        p = "n/a" if not math.isfinite(s.p_value) else (f"{s.p_value:.2g}" if s.p_value >= 1e-4 else "<1e-4")
        lines.append(
            f"| {name} ({unit}) | {fmt(s.mean, digits, True)} | {fmt(s.median, digits, True)} | {fmt(s.min, digits, True)} | "
            f"{fmt(s.max, digits, True)} | {s.n} | {ci} | {p} | {fmt(s.mde, digits)} |"
        )
    lines.append("")
    order = "; ".join(
        f"{o.metric}: {c.mode} first {fmt(o.mean_mode_first, 2, True)} % (n={o.n_mode_first}), "
        f"second {fmt(o.mean_mode_second, 2, True)} % (n={o.n_mode_second}), difference {fmt(o.difference, 2, True)} pp"
        for o in c.order_effects
    )
    lines.append(f"- Order effect: {order}.")
    for st in c.stability:
        lines.append(
            f"- Stability of `{st.mode}` ({st.n_trials} trials): step-time CV within trials "
            f"{fmt(st.step_time_cv_within_pct)} %, across trials {fmt(st.step_time_cv_across_pct)} %; "
            f"throughput CV across trials {fmt(st.throughput_cv_pct)} %."
        )
    if c.host_mismatch:
        lines.append(f"- Pairs whose sides ran on different hosts: {', '.join(c.host_mismatch)}.")
    for e in c.excluded:
        lines.append(f"- Excluded: repeat {e.repeat} in {e.sweep_dir}: {e.reason}.")
    if c.calibration is not None:
        lines.append(f"- {calibration_line(c)}")
    lines.append("")
    return lines


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
                f"half-width ±{fmt(c.metrics['throughput_overhead_pct'].half_width)} %; per-step "
                f"{_ci(c.metrics['step_overhead_pct'], ' %')}.",
                "",
            ]
    lines += _setup(provenance(frame, analysis.baseline))
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
    notes = caveats(analysis, tool_step_coverage(frame))
    lines += ["## Caveats", ""] + ([f"- {line}" for line in notes] or ["- None."]) + [""]
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
