"""Caveats: the rules that say when a report's figures must be read with care, as sentences. Pure."""

from __future__ import annotations

import math
from typing import Sequence

from ddpbench.analysis.coverage import CoverageGap
from ddpbench.analysis.rerun import excluded_text, is_rerun
from ddpbench.analysis.results import Analysis, Comparison
from ddpbench.analysis.switching import below_between
from ddpbench.choices import Role, StopKind, Verdict


def fmt(x: float, digits: int = 2, sign: bool = False) -> str:
    """``x`` with ``digits`` decimals (and a sign with ``sign``); ``n/a`` when it is not a finite number."""
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def fixed_cost_split(c: Comparison) -> tuple[float, float, float, float] | None:
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


def caveats(analysis: Analysis, gaps: Sequence[CoverageGap] = ()) -> list[str]:
    """Every caveat of ``analysis`` as one sentence each (``gaps``: trials whose tool missed steps), in report order."""
    out = [f"{gap.mode} [{gap.condition_id}] repeat {gap.repeat}: the tool analysed {gap.steps_analyzed} steps of "
           f"the {gap.steps_run} the workload ran (warmup + timed); its step instrumentation missed steps, so this "
           "trial may understate the tool's cost." for gap in gaps]
    tools = [c for c in analysis.comparisons if c.role == Role.tool]
    out += [f"{c.label}: duration stop — both modes train for the same time, so wall overhead reflects fixed costs "
            "only (startup, teardown); the per-step cost shows as throughput overhead."
            for c in analysis.comparisons if c.stop_kind == StopKind.duration and c.role != Role.aa]
    for c in tools:
        split = fixed_cost_split(c)
        if split is not None:
            fixed, diff, startup, teardown = split
            step = c.metrics.get("step_overhead_pct")
            out.append(
                f"{c.label}: {fmt(fixed, 2)} s of the {fmt(diff, 2)} s wall difference is fixed per-trial cost "
                f"(start-up {fmt(startup, 2, True)} s, teardown {fmt(teardown, 2, True)} s), paid once per run: the "
                f"trials' wall overhead overstates what a longer job pays, so the verdict is on the per-step cost "
                f"({fmt(step.mean if step else math.nan, 2, True)} %) plus the fixed cost over a "
                f"{analysis.job_hours:g} h job (`report.job_hours`)."
            )
    for c in tools:
        if c.verdict.status == Verdict.inconclusive:
            step = c.metrics.get("step_overhead_pct")
            out.append(f"{c.label}: inconclusive — an interval straddles the {analysis.budget_pct:g} % budget or "
                       f"n < 2 (per-step MDE {fmt(step.mde if step else math.nan)} %); run more pairs.")
    for c in analysis.comparisons:
        if c.excluded:
            reasons = sorted({excluded_text(e) for e in c.excluded})
            out.append(f"{c.label}: {c.n_excluded} pair(s) excluded ({'; '.join(reasons)}).")
        if c.host_mismatch:
            out.append(f"{c.label}: {len(c.host_mismatch)} pair(s) ran their two sides on different hosts.")
        if c.n_pairs and c.role != Role.aa:
            t = c.metrics["throughput_overhead_pct"]
            for o in c.order_effects[:1]:
                if o.n_mode_first and o.n_mode_second and math.isfinite(t.half_width) and abs(o.difference) > max(t.half_width, 1e-9):
                    out.append(
                        f"{c.label}: order effect — throughput overhead differs by {fmt(o.difference, 2, True)} pp "
                        f"between running first and second, more than the interval half-width {fmt(t.half_width)} pp."
                    )
    if analysis.noise_floors:
        for c in tools:
            if c.noise_floor_pct is None:
                continue
            t = c.metrics["throughput_overhead_pct"]
            small = math.isfinite(t.mean) and abs(t.mean) <= c.noise_floor_pct
            out.append(
                f"{c.label}: noise floor ±{fmt(c.noise_floor_pct)} % ({c.noise_floor_source})"
                + (f"; the throughput overhead {fmt(t.mean, 2, True)} % is within it, not resolvable." if small else ".")
            )
    elif tools:
        out.append(
            f"No A/A comparison (`{analysis.baseline}` vs `{analysis.baseline}_aa`) in this report: "
            "the noise floor of this machine is unknown."
        )
    out += switching_caveats(analysis.comparisons)
    out += [f"{c.label}: calibration did not recover the injected cost within tolerance; distrust small overheads."
            for c in analysis.comparisons if c.calibration is not None and c.calibration.all_within is False]
    flags = [f for c in analysis.comparisons for f in c.flags]
    n_pairs = sum(1 for f in flags if f.kind == "disturbed pair")
    n_outliers = sum(1 for f in flags if f.kind == "outlier pair")
    rerun = {(e.sweep_dir, e.condition_id, e.repeat) for c in analysis.comparisons for e in c.excluded if is_rerun(e)}
    counted = [t for t in analysis.disturbed_trials if (t.sweep_dir, t.condition_id, t.repeat) not in rerun]
    if len(counted) < len(analysis.disturbed_trials):
        out.append(f"{len(analysis.disturbed_trials) - len(counted)} disturbed trial(s) belong to pairs that "
                   "repeat=auto re-ran: they are not in the statistics.")
    if counted or flags:
        out.append(
            f"{len(counted)} trial(s) ran while other work took part of the machine, "
            f"{n_pairs} pair(s) disturbed, {n_outliers} outlying pair overhead(s) (listed under Disturbed trials). "
            "They stay in the statistics; one such pair can decide a t interval of a few pairs, so compare the "
            "Hodges–Lehmann estimate and its Wilcoxon interval, which one pair cannot move far, and re-run them."
        )
    if analysis.failed_trials:
        out.append(f"{len(analysis.failed_trials)} trial(s) did not finish ok (listed below).")
    return out


def switching_caveats(comparisons: Sequence[Comparison]) -> list[str]:
    """Within-trial switching: a within-trial figure below the between-trial interval names what the switch leaves on."""
    out: list[str] = []
    for c in comparisons:
        sw = c.switched
        if sw is None or c.role == Role.aa:
            continue
        on_steps = "the switched work ran in about half of its steps"
        out.append(f"{c.label}: switching sweep — {on_steps}, so this comparison's whole-trial figures (the headline "
                   "table, the verdict) are of mixed trials; the per-step cost of the tool fully on is the between-trial "
                   "figure of the on-blocks shown beside the within-trial one.")
        if not below_between(sw, sw.between_low_ms):
            continue
        out.append(
            f"{c.label}: the within-trial per-step cost {fmt(sw.overhead_ms, 3, True)} ms lies below the between-trial "
            f"interval [{fmt(sw.between_low_ms, 3, True)}, {fmt(sw.between_high_ms, 3, True)}] ms of the same trials: the "
            f"tool has per-step costs its switch ({sw.what}) does not turn off — "
            f"{sw.stays_on or 'not declared in the mode'} stays on."
        )
    return out
