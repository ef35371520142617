"""The within-trial per-step cost (``switching=blocks``): trials' ABBA-quad estimates combined into one figure. Pure.

Pooled over the trials' quads, or over the trial estimates when a one-way F test finds the trials disagree
(p < :data:`HETEROGENEITY_P`). Method: docs/analysis.md."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from ddpbench.analysis.figures import finite
from ddpbench.analysis.stats import f_sf, paired_summary, t_ppf

HETEROGENEITY_P = 0.05
"""The F test's p-value below which the trials are combined as ``trials`` (their own spread) instead of ``pooled``."""


@dataclass(frozen=True)
class TrialSwitch:
    """One trial's within-trial estimate: cost (ms per step), its standard error (ms; None with one quad),
    the off-blocks' mean step (ms) and the number of ABBA quads."""

    overhead_ms: float
    se_ms: float | None
    off_step_ms: float
    quads: int


@dataclass(frozen=True)
class SwitchedEstimate:
    """The within-trial per-step cost of one mode in one condition, combined over its trials: ms and % of the
    off-blocks' step with intervals, the F test's p (None with one trial), and what the switch turns off and
    leaves on (the mode's YAML)."""

    n_trials: int
    quads: int
    overhead_ms: float
    ci_low_ms: float
    ci_high_ms: float
    off_step_ms: float
    overhead_pct: float
    ci_low_pct: float
    ci_high_pct: float
    method: str
    df: float
    heterogeneity_p: float | None
    what: str | None = None
    stays_on: str | None = None
    # the between-trial figure of the same trials, tool fully on (see between_on_values): mean and interval, ms
    between_ms: float = math.nan
    between_low_ms: float = math.nan
    between_high_ms: float = math.nan
    between_pairs: int = 0

    @property
    def half_width_ms(self) -> float:
        """Half the interval's width, ms."""
        return (self.ci_high_ms - self.ci_low_ms) / 2.0


def _pooled(trials: Sequence[TrialSwitch]) -> tuple[float, float, float, float | None]:
    """(estimate, standard error, df, heterogeneity p) pooling the trials' quads; se nan without spread."""
    q = [t.quads for t in trials]
    total = sum(q)
    est = sum(t.overhead_ms * t.quads for t in trials) / total
    df = sum(n - 1 for n in q)
    ss = sum((n - 1) * (t.se_ms * math.sqrt(n)) ** 2 for t, n in zip(trials, q) if t.se_ms is not None and n > 1)
    if df <= 0:
        return est, float("nan"), 0.0, None
    s2 = ss / df
    se = math.sqrt(s2 / total)
    p: float | None = None
    if len(trials) > 1 and s2 > 0:
        between = sum(n * (t.overhead_ms - est) ** 2 for t, n in zip(trials, q)) / (len(trials) - 1)
        p = f_sf(between / s2, len(trials) - 1, df)
    return est, se, float(df), p


def combine(trials: Sequence[TrialSwitch], confidence: float = 0.95, what: str | None = None,
            stays_on: str | None = None) -> SwitchedEstimate | None:
    """The trials' within-trial estimates as one figure with its interval; None without a trial."""
    trials = [t for t in trials if t.quads >= 1 and math.isfinite(t.overhead_ms)]
    if not trials:
        return None
    est, se, df, p = _pooled(trials)
    method = "pooled"
    k = len(trials)
    if (p is not None and p < HETEROGENEITY_P) or (not math.isfinite(se) and k > 1):
        method = "trials"
        values = [t.overhead_ms for t in trials]
        est = sum(values) / k
        se = math.sqrt(sum((v - est) ** 2 for v in values) / (k - 1) / k)
        df = float(k - 1)
    half = t_ppf(0.5 + confidence / 2.0, df) * se if df > 0 and math.isfinite(se) else float("nan")
    off = sum(t.off_step_ms * t.quads for t in trials) / sum(t.quads for t in trials)
    scale = 100.0 / off if off > 0 else float("nan")
    return SwitchedEstimate(
        n_trials=k, quads=sum(t.quads for t in trials), overhead_ms=est, ci_low_ms=est - half, ci_high_ms=est + half,
        off_step_ms=off, overhead_pct=est * scale, ci_low_pct=(est - half) * scale, ci_high_pct=(est + half) * scale,
        method=method, df=df, heterogeneity_p=p, what=what, stays_on=stays_on,
    )


def trial_switch_of(row: Mapping[str, Any]) -> TrialSwitch | None:
    """A collected row's within-trial estimate (``switched_*`` columns), or None when the trial did not switch."""
    overhead, off, quads = (finite(row.get(k)) for k in ("switched_step_overhead_ms", "switched_off_step_ms",
                                                           "switched_quads"))
    if overhead is None or off is None or quads is None:
        return None
    return TrialSwitch(overhead, finite(row.get("switched_step_overhead_se_ms")), off, int(quads))


def switched_of_rows(rows: Sequence[Mapping[str, Any]], confidence: float = 0.95) -> SwitchedEstimate | None:
    """The combined within-trial figure of one mode's trials (collected rows); None when none switched."""
    trials = [t for t in (trial_switch_of(r) for r in rows) if t is not None]
    first = next((r for r in rows if trial_switch_of(r) is not None), {})
    what, stays = first.get("switch_what"), first.get("switch_stays_on")
    return combine(trials, confidence, what=str(what) if isinstance(what, str) else None,
                   stays_on=str(stays) if isinstance(stays, str) else None)


def _blocks_of(blocks_json: Any) -> list[Mapping[str, Any]]:
    """A trial's blocks from their collected JSON text; none when it is missing or unreadable."""
    try:
        blocks = json.loads(blocks_json) if isinstance(blocks_json, str) else None
    except ValueError:
        return []
    return [b for b in blocks or [] if isinstance(b, dict)]


def _side_mean_ms(blocks: Sequence[Mapping[str, Any]], side: str) -> float | None:
    """Mean step (ms) of the blocks of one side, each block weighted by its steps beyond the wash-out."""
    kept = [(float(b["mean_ms"]), int(b["steps"]) - int(b["washout_steps"])) for b in blocks if b.get("side") == side]
    total = sum(n for _, n in kept)
    return sum(m * n for m, n in kept) / total if total > 0 else None


def full_on_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A collected row whose trial switched, as if its tool were on in every timed step: the off-block steps counted
    at the on-blocks' mean step (``full_on`` True). A row that did not switch comes back unchanged."""
    blocks = _blocks_of(row.get("switch_blocks_json"))
    on, off = _side_mean_ms(blocks, "on"), _side_mean_ms(blocks, "off")
    out = dict(row)
    if on is None or off is None:
        return out
    steps = sum(int(b["steps"]) for b in blocks)
    off_steps = sum(int(b["steps"]) for b in blocks if b.get("side") == "off")
    added_s = off_steps * (on - off) / 1000.0
    for column in ("step_time_ms_mean", "step_time_ms_median"):
        value = finite(row.get(column))
        if value is not None and steps:
            out[column] = value + off_steps * (on - off) / steps
    train = finite(row.get("train_s"))
    if train is not None and train > 0 and train + added_s > 0:
        for column in ("steps_per_s", "samples_per_s"):
            rate = finite(row.get(column))
            if rate is not None:
                out[column] = rate * train / (train + added_s)
        out["train_s"] = train + added_s
    wall = finite(row.get("wall_s"))
    if wall is not None:
        out["wall_s"] = wall + added_s
    out["full_on"] = True
    return out


def between_on_values(pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> list[float]:
    """Per pair (baseline row, mode row): the mode's on-block mean step − the baseline's, ms: the between-trial
    per-step cost of the tool fully on, from the same trials and step positions as the within-trial figure."""
    values = []
    for base, mode in pairs:
        b, m = (_side_mean_ms(_blocks_of(row.get("switch_blocks_json")), "on") for row in (base, mode))
        if b is not None and m is not None:
            values.append(m - b)
    return values


def switched_of_pairs(pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], confidence: float = 0.95
                      ) -> tuple[SwitchedEstimate | None, SwitchedEstimate | None]:
    """(the mode's within-trial figure with the between-trial figure of the same trials, the baseline's no-op floor)."""
    mode = switched_of_rows([m for _, m in pairs], confidence)
    base = switched_of_rows([b for b, _ in pairs], confidence)
    values = between_on_values(pairs)
    if mode is not None and values:
        s = paired_summary(values, confidence)
        mode = replace(mode, between_ms=s.mean, between_low_ms=s.ci_low, between_high_ms=s.ci_high, between_pairs=s.n)
    return mode, base


def below_between(switched: SwitchedEstimate, between_low_ms: float) -> bool:
    """Whether the within-trial figure lies below the between-trial interval (below its lower end, ms): the tool
    has per-step costs its switch does not turn off."""
    return math.isfinite(switched.overhead_ms) and math.isfinite(between_low_ms) and switched.overhead_ms < between_low_ms
