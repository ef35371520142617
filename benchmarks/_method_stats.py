"""The statistics of ``method_comparison.py``, pure: each method's estimate of a tool's per-step cost from its own
measurements, the verdict its stated interval gives, and the summary over repeated campaigns.

Every estimate is the tool's cost per step in % of the native step, with the half-width of the interval the method
itself states (not necessarily a 95 % interval: each method is judged by what it claims).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ddpbench.analysis.verdict import Figure
from ddpbench.choices import Choice, Verdict


class Method(Choice):
    """A way of measuring a tool's cost."""

    ddpbench = "ddpbench"  # python -m ddpbench -m mode=native,<tool> repeat=1-N: the report's step_overhead_pct
    seed = "seed"  # alternating fixed-duration runs, mean throughput compared (TraceML's benchmark-v1)
    whole_process = "whole_process"  # hyperfine style: N runs of each command, mean +- SD of wall time
    harness = "harness"  # TraceML's attribution harness: median of per-process medians, its noise floor


@dataclass(frozen=True)
class Estimate:
    """One campaign's answer: the tool's per-step cost (% of the native step) and its stated interval's half-width
    (percentage points; NaN when the method states none)."""

    pct: float
    half_width_pct: float
    # pairs (or runs per command) behind it
    n: int

    def status(self, budget_pct: float) -> Verdict:
        """``over`` / ``within`` / ``inconclusive``: the stated interval against ``budget_pct`` (ddpbench's rule for
        a whole-cost figure: wholly above, wholly below, else undecided)."""
        low, high = self.pct - self.half_width_pct, self.pct + self.half_width_pct
        return Figure("step_overhead_pct", self.pct, low, high, self.n, whole_cost=True).status(budget_pct)

    def covers(self, value: float) -> bool:
        """Whether the stated interval holds ``value`` (False without an interval)."""
        return math.isfinite(self.half_width_pct) and abs(value - self.pct) <= self.half_width_pct


def ddpbench_estimate(metric: Mapping[str, float | None], n: int) -> Estimate:
    """From an analysis.json metric (``step_overhead_pct``: ``mean``, ``ci_low``, ``ci_high``): its 95 % paired t
    interval as stated."""
    mean, low, high = (float("nan") if metric.get(k) is None else float(metric[k])  # type: ignore[arg-type]
                       for k in ("mean", "ci_low", "ci_high"))
    return Estimate(mean, (high - low) / 2.0, n)


def seed_estimate(base_steps_per_s: Sequence[float], tool_steps_per_s: Sequence[float]) -> Estimate:
    """The seed's method: throughput overhead = mean native steps/s / mean tool steps/s − 1, in %, which is the
    tool's per-step cost in % of the native step (a step is 1 / throughput). Its "±" (the seed's reports do not say
    what it is) is read as the standard error of the per-pair throughput overheads, SD / √n: the narrower reading."""
    if len(base_steps_per_s) != len(tool_steps_per_s) or not base_steps_per_s:
        raise ValueError("seed: one native and one tool throughput per pair")
    pct = 100.0 * (statistics.fmean(base_steps_per_s) / statistics.fmean(tool_steps_per_s) - 1.0)
    per_pair = [100.0 * (b / x - 1.0) for b, x in zip(base_steps_per_s, tool_steps_per_s)]
    n = len(per_pair)
    se = statistics.stdev(per_pair) / math.sqrt(n) if n > 1 else float("nan")
    return Estimate(pct, se, n)


def whole_process_estimate(base_long: Sequence[float], tool_long: Sequence[float], base_short: Sequence[float],
                           tool_short: Sequence[float]) -> Estimate:
    """Whole-process timing at two lengths (wall seconds of runs of S timed steps and of S0): the fixed cost
    (start-up, teardown) is the same at both lengths, so the per-step cost is what the long runs' wall difference
    adds over the short runs':

        per-step % = 100 · [(x̄_S − x̄_S0) − (b̄_S − b̄_S0)] / (b̄_S − b̄_S0)

    (b̄_S − b̄_S0 is (S − S0) native steps). The stated ± is hyperfine's: its σ of single runs propagated through
    the same formula, √(σ²_xS + σ²_xS0 + σ²_bS + σ²_bS0) / (b̄_S − b̄_S0), the native slope taken as exact."""
    groups = (base_long, tool_long, base_short, tool_short)
    if not all(groups):
        raise ValueError("whole_process: runs of each command at both lengths")
    b_l, x_l, b_s, x_s = (statistics.fmean(g) for g in groups)
    native = b_l - b_s
    if not native > 0:
        raise ValueError(f"whole_process: the long native runs ({b_l:.2f} s) are not longer than the short ({b_s:.2f} s)")
    pct = 100.0 * ((x_l - x_s) - native) / native
    n = min(len(g) for g in groups)
    spread = math.sqrt(sum(statistics.stdev(g) ** 2 for g in groups)) if n > 1 else float("nan")
    return Estimate(pct, 100.0 * spread / native, n)


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile with linear interpolation between order statistics (numpy's default; the harness's)."""
    data = sorted(values)
    if not data:
        raise ValueError("percentile of nothing")
    pos = (len(data) - 1) * pct / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return data[low] + (data[high] - data[low]) * (pos - low)


def noise_floor(steps_ms: Sequence[float]) -> float:
    """The harness's noise floor of a baseline's step times (ms): max(population SD, |p95 − median|)."""
    return max(statistics.pstdev(steps_ms), abs(percentile(steps_ms, 95.0) - percentile(steps_ms, 50.0)))


def harness_estimate(base_process_steps: Sequence[Sequence[float]],
                     tool_process_steps: Sequence[Sequence[float]]) -> Estimate:
    """TraceML's attribution harness: each process's median step (ms; its ranks' steps pooled), the median of those
    medians per configuration, the tool's minus the baseline's in % of the baseline's; its stated ± is the noise
    floor of the baseline's steps pooled over every process, in % of the same baseline median (a difference within
    it is "within noise")."""
    if not base_process_steps or not tool_process_steps or not all(base_process_steps) or not all(tool_process_steps):
        raise ValueError("harness: step times of at least one process per configuration")
    base = statistics.median(percentile(p, 50.0) for p in base_process_steps)
    tool = statistics.median(percentile(p, 50.0) for p in tool_process_steps)
    floor = noise_floor([s for p in base_process_steps for s in p])
    return Estimate(100.0 * (tool - base) / base, 100.0 * floor / base,
                    min(len(base_process_steps), len(tool_process_steps)))


def units_for_budget(budget_s: float, unit_s: float, minimum: int = 2) -> int:
    """How many units (pairs, or rounds of runs) of ``unit_s`` seconds fit ``budget_s``; at least ``minimum`` (an
    interval needs two)."""
    if not unit_s > 0:
        raise ValueError(f"a unit of {unit_s} s")
    return max(minimum, int(budget_s // unit_s))


@dataclass(frozen=True)
class Summary:
    """One method's figures over K campaigns of the tool and K of A/A."""

    method: Method
    campaigns: int
    mean_pct: float
    # the empirical SD of its estimate over the campaigns (needs no ground truth)
    sd_pct: float
    # the mean of its stated half-widths (of the campaigns that stated one)
    half_width_pct: float
    # the other methods' pooled estimate (the mean of their mean estimates) and the share of campaigns whose stated
    # interval holds it
    others_pct: float
    covers_others: float
    # A/A: campaigns, the share judged ``over`` against the budget (false), ``within`` (right), and the share whose
    # interval leaves out 0 (a cost claimed where there is none)
    aa_campaigns: int
    aa_false_over: float
    aa_within: float
    aa_excludes_zero: float
    # sd_pct over the reference method's sd_pct (the headline)
    sd_ratio: float
    # machine seconds per tool campaign, mean
    machine_s: float


def _share(flags: Iterable[bool]) -> float:
    values = list(flags)
    return sum(values) / len(values) if values else float("nan")


def _finite_mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return statistics.fmean(finite) if finite else float("nan")


def _sd(values: Sequence[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def summarize(tool: Mapping[Method, Sequence[Estimate]], aa: Mapping[Method, Sequence[Estimate]],
              machine_s: Mapping[Method, Sequence[float]], budget_pct: float,
              reference: Method = Method.ddpbench) -> list[Summary]:
    """Each method's summary, in ``tool``'s order. ``tool``/``aa``: each method's campaign estimates (an empty
    sequence: not run); ``machine_s``: the seconds each of its campaigns took."""
    means = {m: statistics.fmean(e.pct for e in es) for m, es in tool.items() if es}
    ref_sd = _sd([e.pct for e in tool.get(reference, [])])
    out = []
    for method, estimates in tool.items():
        pcts = [e.pct for e in estimates]
        others = [v for m, v in means.items() if m != method]
        pooled = statistics.fmean(others) if others else float("nan")
        aa_es = list(aa.get(method, []))
        sd = _sd(pcts)
        out.append(Summary(
            method=method, campaigns=len(estimates), mean_pct=means.get(method, float("nan")), sd_pct=sd,
            half_width_pct=_finite_mean([e.half_width_pct for e in estimates]),
            others_pct=pooled,
            covers_others=_share(e.covers(pooled) for e in estimates) if others else float("nan"),
            aa_campaigns=len(aa_es), aa_false_over=_share(e.status(budget_pct) is Verdict.over for e in aa_es),
            aa_within=_share(e.status(budget_pct) is Verdict.within for e in aa_es),
            aa_excludes_zero=_share(math.isfinite(e.half_width_pct) and not e.covers(0.0) for e in aa_es),
            sd_ratio=sd / ref_sd if ref_sd > 0 else float("nan"),
            machine_s=statistics.fmean(machine_s[method]) if machine_s.get(method) else float("nan")))
    return out
