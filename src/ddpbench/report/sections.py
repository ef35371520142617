"""Sections of report.md beside the tables: setup, method, details per comparison, calibration, TFLOP/s,
within-trial switching, disturbed trials and pairs, the tools' own output. Pure layout of :mod:`ddpbench.analysis`.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ddpbench.analysis.caveats import fmt
from ddpbench.analysis.device_split import host_sync_text
from ddpbench.analysis.metrics import pair_metric
from ddpbench.analysis.paired import Analysis, Comparison
from ddpbench.analysis.projection import PROJECTED
from ddpbench.analysis.provenance import Provenance
from ddpbench.analysis.rerun import excluded_text, is_rerun, rerun_reason
from ddpbench.analysis.results import Efficiency
from ddpbench.analysis.switching import SwitchedEstimate
from ddpbench.analysis.verdict import LOWER_BOUND, Figure, figure_name
from ddpbench.choices import Role
from ddpbench.report.tables import ci, robust_text


def setup(prov: Provenance) -> list[str]:
    lines = ["## Setup", ""]
    lines += [
        f"- Hardware: CPU {', '.join(prov.cpu_models) or 'unknown'}"
        f" ({', '.join(prov.cpu_counts) or '?'} cores); "
        f"GPU {', '.join(prov.gpu_names) if prov.gpu_names else 'none'}; hosts {', '.join(prov.hostnames) or 'unknown'}",
        f"- Topology: {'; '.join(prov.topologies) or 'unknown'}",
    ]
    versions = [f"{label} {', '.join(values)}" for label, values in prov.versions]
    lines.append(f"- Versions: {'; '.join(versions) or 'unknown'}")
    if prov.ray_startup:
        each = ", ".join(f"{mode} {mean:.2f} s (n={n})" for mode, mean, n in prov.ray_startup)
        lines.append(f"- Ray start-up (connecting to Ray, starting the worker group; part of the start-up figure), "
                     f"mean per trial: {each}")
    several = len(prov.host_syncs) > 1
    for value, conds in prov.host_syncs:
        where = f" (in {', '.join(f'`{c}`' for c in conds)})" if several else ""
        lines.append(f"- Training loop: `host_sync={value}`, {host_sync_text(value)}{where}")
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


def method(analysis: Analysis) -> list[str]:
    b = analysis.baseline
    return [
        "## Method",
        "",
        f"- Paired trials: each repeat runs every mode once, alternating order between repeats; a pair is "
        f"the `{b}` trial and a mode's trial with the same sweep dir, condition and repeat.",
        f"- Wall overhead = x.wall_s / {b}.wall_s − 1 (spawn to exit of the slowest node, what `time` reports).",
        f"- Throughput overhead = {b}.steps_per_s / x.steps_per_s − 1 (slowest rank's timed steps per second).",
        f"- Per-step overhead = x.step_time_ms.mean − {b}.step_time_ms.mean (ms, mean over ranks), and the same of "
        "each trial's median step (robust to a few slow steps); absolute ms first, % second; wall, start-up and "
        "teardown differences in seconds. A % against a near-zero baseline is not shown (note beside the table).",
        f"- Across pairs: mean of the paired differences with a {analysis.methods['interval']}; "
        f"p-value from the {analysis.methods['test']} (H0: no difference); "
        f"minimum detectable effect (MDE) for {analysis.methods['mde']}. Beside it: "
        f"{analysis.methods.get('robust', 'no robust interval')}.",
        f"- Fixed cost = start-up Δ + teardown Δ (s): paid once per run, however long the run trains. Projected "
        f"overhead over a {analysis.job_hours:g} h job (`report.job_hours`, `--job-hours`) = per-step Δ % + "
        f"100 · fixed Δ s / ({analysis.job_hours:g} · 3600 s), per pair; its interval is the paired t interval of "
        "those per-pair values (the covariance of the two parts included).",
        f"- Verdict against the {analysis.budget_pct:g} % budget, on the per-step overhead % and the projected "
        "overhead: `within` when both intervals lie below it, `over` when either lies wholly above it, else "
        "`inconclusive`. The trials' own wall overhead is in the table; a short trial pays the fixed cost in full, "
        "so it decides nothing.",
        "- Walls and throughputs of each side are shown as mean ± t half-width over repeats.",
        "",
    ]


def verdict_line(c: Comparison, job_hours: float) -> str:
    """The headline of one tool comparison: its verdict, the figures that decided it and their projection onto a
    ``job_hours`` job."""
    m, v = c.metrics, c.verdict
    per = v.per_metric
    step_pct = "—" if "step_overhead_pct" in c.pct_notes else ci(m.get("step_overhead_pct"), " %")
    step = f"per-step {ci(m.get('step_overhead_ms'), ' ms', 3)} ({step_pct})"
    projected = ("unknown (no start-up/teardown split)" if PROJECTED not in per
                 else f"{ci(m.get(PROJECTED), ' %')}: {per[PROJECTED]}")
    lower = ""
    if v.lower_bound_pct is not None:
        mean, low, high = v.lower_bound_pct
        level = f" ({100 * v.lower_bound_confidence:g} %)" if v.lower_bound_confidence else ""
        bound = Figure(LOWER_BOUND, mean, low, high, 0, False).text()
        lower = (f"; within-trial lower bound {bound}{level}: "
                 + (per[LOWER_BOUND] if LOWER_BOUND in per else "not used (the per-step figure lies below it)"))
    decided = (f" (decided by: {', '.join(figure_name(k) for k in v.decided_by)})" if v.decided_by else "")
    reruns = [str(e.repeat) for e in c.excluded if is_rerun(e)]
    trial_s = c.sides["base_wall_s"].mean if "base_wall_s" in c.sides else math.nan
    return (
        f"- {c.label}: **{v.status}**{decided} — {step}: {per.get('step_overhead_pct', 'unknown')}; fixed "
        f"{ci(m.get('fixed_diff_s'), ' s')} per run (start-up {fmt(m['startup_diff_s'].mean, 2, True)} s, teardown "
        f"{fmt(m['teardown_diff_s'].mean, 2, True)} s); over a {job_hours:g} h job: {projected}{lower}. These "
        f"{fmt(trial_s, 1)} s trials' own wall overhead: {ci(m.get('wall_overhead_pct'), ' %')}"
        + (f" (disturbed, re-run and not counted: pair{'s' * (len(reruns) > 1)} {', '.join(reruns)})" if reruns else "")
        + "."
    )


def calibration_line(c: Comparison) -> str:
    """One sentence: injected vs recovered per cost, and whether all are within tolerance."""
    if c.calibration is None:
        return f"Calibration ({c.label}): no `config.inject` values recorded."
    parts = []
    for item in c.calibration.items:
        side = {"host": " on the host", "device": " on the device"}.get(item.side, "")
        if item.injected == 0:
            parts.append(f"{item.name} not injected (measured {fmt(item.recovered, 3, True)} {item.unit})")
        else:
            where = f"; {item.where}" if item.where else ""
            judged = "" if item.within_tolerance is not None or item.knowable is None else ", not judged"
            parts.append(
                f"{item.name} injected {fmt(item.injected, 3)} {item.unit}{side}, recovered {fmt(item.recovered, 3)} "
                f"{item.unit} ({fmt(item.error_pct, 1, True)} %{judged}{where})"
            )
    ok = c.calibration.all_within
    tail = (
        f"all within {c.calibration.tolerance_pct:g} %" if ok
        else "nothing injected" if ok is None
        else f"NOT all within {c.calibration.tolerance_pct:g} %"
    )
    return f"Calibration ({c.label}, {c.n_pairs} pairs): " + "; ".join(parts) + f" — {tail}."


def details(c: Comparison) -> list[str]:
    lines = [f"### {c.label}", ""]
    if c.role == Role.tool:
        lines.append(f"Verdict: **{c.verdict.status}** — {c.verdict.reason}.")
        lines.append("")
    lines += [
        "| metric | mean | median | min | max | n | 95 % CI (t) | p | MDE (80 %) | HL [Wilcoxon] (level) | bootstrap median CI |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in c.metrics.items():
        spec = pair_metric(name)
        unit = spec.unit if spec is not None else ""
        digits = 3 if unit == "ms" else 2
        if s.n == 0:
            lines.append(f"| {name} ({unit}) | unknown | | | | 0 | | | | | |")
            continue
        interval = f"[{fmt(s.ci_low, digits, True)}, {fmt(s.ci_high, digits, True)}]" if math.isfinite(s.ci_low) else "n/a"
        p = "n/a" if not math.isfinite(s.p_value) else (f"{s.p_value:.2g}" if s.p_value >= 1e-4 else "<1e-4")
        r = c.robust.get(name)
        boot = (f"[{fmt(r.boot_low, digits, True)}, {fmt(r.boot_high, digits, True)}]"
                if r is not None and math.isfinite(r.boot_low) else "")
        lines.append(
            f"| {name} ({unit}) | {fmt(s.mean, digits, True)} | {fmt(s.median, digits, True)} | {fmt(s.min, digits, True)} | "
            f"{fmt(s.max, digits, True)} | {s.n} | {interval} | {p} | {fmt(s.mde, digits)} | {robust_text(r, digits)} | {boot} |"
        )
    for name, note in c.pct_notes.items():
        lines.append(f"| {name} (%) | — ({note}) | | | | | | | | | |")
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
        lines.append(f"- Not counted: {excluded_text(e)}." if is_rerun(e)
                     else f"- Excluded: repeat {e.repeat} in {e.sweep_dir}: {excluded_text(e)}.")
    if c.calibration is not None:
        lines.append(f"- {calibration_line(c)}")
    for flag in c.flags:
        lines.append(f"- {flag.kind.capitalize()}: repeat {flag.repeat}: {flag.reason}.")
    lines.append("")
    return lines


def _efficiency(e: Efficiency) -> str:
    if e.tflops is None:
        return f"{e.mode} unknown ({e.note})"
    frac = f"{100 * e.fraction_of_peak:.2f} % of the {e.gpu} {e.precision} peak" if e.fraction_of_peak is not None else e.note
    return f"{e.mode} {e.tflops:.3g} TFLOP/s ({frac}; {e.flops_per_step:.3g} model FLOPs per rank per step)"


def efficiency_line(comparisons: Sequence[Comparison]) -> list[str]:
    """One line: achieved model TFLOP/s per GPU of every mode of a condition (or why unknown)."""
    seen: dict[str, Efficiency] = {}
    for c in comparisons:
        for e in c.efficiency:
            if e.mode not in seen or (seen[e.mode].tflops is None and e.tflops is not None):
                seen[e.mode] = e
    if not seen:
        return []
    notes = {e.note for e in seen.values()}
    if all(e.tflops is None for e in seen.values()) and len(notes) == 1:
        return [f"Achieved model TFLOP/s per GPU: unknown ({notes.pop()}).", ""]
    return ["Achieved model TFLOP/s per GPU (MLP matrix products over the mean step): "
            + "; ".join(_efficiency(e) for e in seen.values()) + ".", ""]


def disturbed(analysis: Analysis) -> list[str]:
    """The "Disturbed trials" part of the caveats: every disturbed trial, disturbed pair and outlying pair."""
    flags = list(analysis.disturbed_trials) + [f for c in analysis.comparisons for f in c.flags]
    lines = ["### Disturbed trials", ""]
    if not flags:
        return lines + ["None flagged (trials without a `load` record cannot be checked).", ""]
    for f in flags:
        lines.append(f"- {f.kind}: {f.mode} repeat {f.repeat} [{f.condition_id}]: {f.reason}")
    return lines + [""]


def artifacts(analysis: Analysis) -> list[str]:
    """Each trial's tool output status (trial record v2 ``tool``); nothing when no trial recorded one."""
    if not analysis.tool_artifacts:
        return []
    lines = ["## Tool output", "", "| condition | mode | repeat | tool | usable | bytes | problem |",
             "|---|---|---|---|---|---|---|"]
    for a in analysis.tool_artifacts:
        usable = "unknown" if a.usable is None else ("yes" if a.usable else "**no**")
        size = "unknown" if a.bytes is None else f"{a.bytes:,}"
        problem = (a.problem or "").replace("|", "\\|")
        lines.append(f"| {a.condition_id} | {a.mode} | {a.repeat} | {a.name or '—'} | {usable} | {size} | {problem} |")
    return lines + [""]


def stopping_section(record: Mapping[str, Any]) -> list[str]:
    """``## Why the sweep stopped``: the repeat=auto rule and, per condition, its pairs and reason."""
    rule = record.get("rule", {})
    decided_on = (" (the verdict's figure: the per-step cost plus the fixed cost over the sweep's `report.job_hours`)"
                  if str(rule.get("metric")) == PROJECTED else "")
    disturbed_rule = {
        "rerun": "A pair whose trials' load shows other work disturbed it was re-run, not counted (it still used up "
                 "max_pairs and max_minutes).",
        "count": "Disturbed pairs were counted like the others (precision.disturbed=count).",
    }.get(str(rule.get("disturbed", "count")), "")
    lines = ["## Why the sweep stopped (repeat=auto)", "",
             f"Pairs were added until `{rule.get('metric')}`{decided_on} was decided against the budget of "
             f"{rule.get('budget')} ({rule.get('spending')} alpha spending over at most {rule.get('max_pairs')} "
             f"looks, {float(rule.get('confidence', 0.95)) * 100:g} % overall; at least {rule.get('min_pairs')} "
             f"pairs; half-width target {rule.get('halfwidth')}; at most {rule.get('max_minutes')} min). "
             + disturbed_rule, "",
             "| condition | pairs run (counted) | stopped because | per mode |", "|---|---|---|---|"]
    reruns = []
    for condition in record.get("conditions", []):
        shown = " ".join(condition.get("condition") or []) or "all"
        modes = "; ".join(f"{mode}: {c.get('message')}" for mode, c in (condition.get("comparisons") or {}).items())
        counted = condition.get("counted")
        pairs = f"{condition.get('pairs')} ({len(counted)})" if counted is not None else f"{condition.get('pairs')}"
        lines.append(f"| {shown} | {pairs} | {condition.get('reason')} | {modes} |")
        reruns += [f"- {shown}: {rerun_reason(int(e['repeat']), str(e.get('why')))}."
                   for e in condition.get("excluded") or []]
    return lines + ([""] + reruns if reruns else []) + [""]


def _interval(sw: SwitchedEstimate) -> str:
    if not math.isfinite(sw.ci_low_ms):
        return f"{fmt(sw.overhead_ms, 3, True)} ms (no interval: one quad)"
    return (f"{fmt(sw.overhead_ms, 3, True)} ms [{fmt(sw.ci_low_ms, 3, True)}, {fmt(sw.ci_high_ms, 3, True)}] "
            f"({fmt(sw.overhead_pct, 2, True)} % [{fmt(sw.ci_low_pct, 2, True)}, {fmt(sw.ci_high_pct, 2, True)}])")


def _between(sw: SwitchedEstimate) -> str:
    if not math.isfinite(sw.between_ms):
        return "unknown"
    if not math.isfinite(sw.between_low_ms):
        return f"{fmt(sw.between_ms, 3, True)} ms (one pair: no interval)"
    return f"{fmt(sw.between_ms, 3, True)} ms [{fmt(sw.between_low_ms, 3, True)}, {fmt(sw.between_high_ms, 3, True)}]"


def switching_lines(comparisons: Sequence[Comparison]) -> list[str]:
    """The headline lines (one per comparison that switched) and the note on which figure answers what."""
    switched = [c for c in comparisons if c.switched is not None]
    if not switched:
        return []
    lines = ["Two per-step figures answer two questions. **Within-trial** (`switching=blocks`: blocks of steps with "
             "the tool's switchable per-step work off and on inside the same processes, ABBA order): what the "
             "instrumentation the switch turns off costs per step, free of the process-to-process variance. "
             "**Between-trial** (paired trials): what the tool costs in all, including what its switch leaves on "
             "(threads, aggregator, start-up). The baseline's switch is a no-op: its within-trial interval is the "
             "method's own noise floor.", ""]
    for c in switched:
        sw = c.switched
        assert sw is not None
        floor = c.switched_base
        floor_text = f"; no-op switch ({c.baseline}, noise floor): {_interval(floor)}" if floor is not None else ""
        lines.append(
            f"- {c.label}: within-trial (switch `{sw.what}`, {sw.n_trials} trial(s), {sw.quads} quads, {sw.method}): "
            f"per-step {_interval(sw)}; between-trial, the same trials' on-blocks against the baseline's "
            f"({sw.between_pairs} pairs): {_between(sw)}{floor_text}. Stays on while switched off: {sw.stays_on or '—'}."
        )
    return lines + [""]
