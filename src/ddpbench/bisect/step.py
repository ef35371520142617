"""One commit of a bisection measured against the good commit, as ``repeat=auto`` does: each look is a child
sweep of the mode at both commits (``versions=``) that adds pairs, read back from the trial records and decided
by :func:`ddpbench.analysis.sequential.decide` on the per-step Δ % against ``regression_pct``.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from ddpbench.bisect.commits import Commit
from ddpbench.choices import Disturbed, Spending, TrialStatus, Verdict
from ddpbench.errors import ConfigError
from ddpbench.formats.bisect_record import StepState, StepStatus
from ddpbench.sweep.order import quote_value

#: the overall confidence of each commit's sequence of intervals (the sequential rule's)
CONFIDENCE = 0.95


class Interrupted(Exception):
    """A look's sweep was stopped by a signal (its exit status is ``code``): the bisection stops, resumable."""

    def __init__(self, code: int) -> None:
        super().__init__(f"a look's sweep was interrupted (exit status {code})")
        self.code = code


@dataclass(frozen=True)
class Rule:
    """When a commit is decided (``precision.*`` and ``regression_pct`` of the bisection's config)."""

    # a commit whose per-step cost exceeds the good commit's by more than this % is bad
    regression_pct: float
    min_pairs: int
    max_pairs: int
    max_minutes: float
    spending: Spending
    # rerun: a disturbed pair is not counted; count: it is
    disturbed: Disturbed
    # switching=blocks: each trial's within-trial figure (tool on vs off) is what is compared
    switched: bool

    @property
    def metric(self) -> str:
        """What each pair's value is: the between-trial per-step Δ %, or the within-trial one."""
        return "switched_step_overhead_pct" if self.switched else "step_overhead_pct"


@dataclass(frozen=True)
class Plan:
    """What every look of every commit shares: the mode, the good arm, the user's overrides, where to write."""

    name: str
    mode: str
    good_spec: str
    good_arm: str
    overrides: Sequence[str]
    config_dir: Optional[str]
    folder: Path
    rule: Rule
    # the interpreter the looks' sweeps run with
    python: str = sys.executable


@dataclass
class Evidence:
    """What a commit's trials say so far: the counted pairs' values (%), the repeats run, what was left out."""

    values: List[float] = field(default_factory=list)
    counted: List[int] = field(default_factory=list)
    excluded: List[Dict[str, Any]] = field(default_factory=list)
    repeats: int = 0
    failed: Optional[str] = None


def pair_value(pair: Any, sides: Any, rule: Rule) -> float:
    """One pair's value, % of the good commit's step: the paired per-step Δ, or under switching the difference
    of the two trials' within-trial costs over the good trial's tool-on step time (their off-blocks cancel)."""
    if not rule.switched:
        return float(pair.step_overhead_pct)
    good, candidate = sides
    try:
        good_ms, cand_ms = float(good["switched_step_overhead_ms"]), float(candidate["switched_step_overhead_ms"])
        on_ms = float(good["switched_off_step_ms"]) + good_ms
    except (KeyError, TypeError, ValueError):
        return math.nan
    return 100.0 * (cand_ms - good_ms) / on_ms if on_ms > 0 else math.nan


def evidence(folder: Path, good_arm: str, arm: str, rule: Rule) -> Evidence:
    """The pairs of the commit's folder (good arm vs ``arm``), read from the trial records alone."""
    from ddpbench.analysis.pairing import pair_table
    from ddpbench.analysis.rerun import disturbed_repeats
    from ddpbench.collect.collector import collect_trials

    frame = collect_trials([folder]).frame
    found = Evidence()
    if not len(frame):
        return found
    found.repeats = int(frame["repeat"].nunique())
    bad = frame[frame["status"] != TrialStatus.ok]
    if len(bad):
        row = bad.iloc[0]
        found.failed = f"{row['mode']} repeat {row['repeat']}: {row.get('error') or row['status']}"
    pairs, _, sides = pair_table(frame, baseline=good_arm)
    pairs = sorted((p for p in pairs if p.mode == arm), key=lambda p: p.repeat)
    disturbed = disturbed_repeats(pairs, sides, good_arm) if rule.disturbed == Disturbed.rerun else {}
    found.excluded = [{"repeat": repeat, "why": why} for repeat, why in sorted(disturbed.items())]
    for pair in pairs:
        value = pair_value(pair, sides[(pair.sweep_dir, pair.condition_id, pair.repeat, pair.mode)], rule)
        if pair.repeat not in disturbed and math.isfinite(value):
            found.values.append(value)
            found.counted.append(pair.repeat)
    return found


def look_command(plan: Plan, spec: str, folder: Path, first: int, last: int) -> List[str]:
    """The child sweep of one look: repeats ``first``..``last`` of the good arm and ``spec``'s, into ``folder``
    (``baseline=`` unquoted where it can be: the job dirs carry it)."""
    versions = f"versions={{{plan.mode}:[{quote_value(plan.good_spec)},{quote_value(spec)}]}}"
    repeat = f"repeat={first}" if first == last else f"repeat={first}-{last}"
    baseline = plan.good_arm if re.fullmatch(r"[\w.@-]+", plan.good_arm) else quote_value(plan.good_arm)
    return [plan.python, "-m", "ddpbench", *(["--config-dir", plan.config_dir] if plan.config_dir else []), "-m",
            f"mode={plan.mode}", versions, f"baseline={baseline}", repeat,
            f"sweep_name={plan.name}.{folder.name}", f"hydra.sweep.dir={quote_value(str(folder))}", *plan.overrides]


def run_look(argv: Sequence[str]) -> None:
    """Run one look's sweep (its progress lines pass through); ConfigError with its one line on bad input,
    Interrupted when a signal stopped it. A failed trial is not an error here: the records say so."""
    process = subprocess.Popen(list(argv), stderr=subprocess.PIPE, text=True)
    try:
        _, err = process.communicate()
    except KeyboardInterrupt:
        process.wait()
        raise
    if process.returncode == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ddpbench: error:")]
        raise ConfigError((errors or lines or ["the look's sweep refused its input"])[-1]
                          .removeprefix("ddpbench: error: "))
    if err.strip():
        print(err.rstrip(), file=sys.stderr, flush=True)
    if process.returncode not in (0, 1):
        raise Interrupted(process.returncode)


def measure(plan: Plan, commit: Commit, spec: str, arm: str, entry: Dict[str, Any],
            save: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
    """Measure ``commit`` (its version spec ``spec``, arm name ``arm``) until its verdict is known; ``entry``
    is its step record (resumed as it was), updated and handed to ``save`` after every look."""
    folder = Path(entry["sweep_dir"])
    rule, started = plan.rule, time.monotonic()
    found = evidence(folder, plan.good_arm, arm, rule)
    while True:
        need = rule.min_pairs - len(found.values) if len(found.values) < rule.min_pairs else 1
        first = found.repeats + 1
        last = min(rule.max_pairs, found.repeats + max(1, need))
        if found.failed is None and first <= last and not _decided(found, rule, started):
            run_look(look_command(plan, spec, folder, first, last))
            found = evidence(folder, plan.good_arm, arm, rule)
        decision = _decision(found, rule, started)
        status = _status(found, decision, rule)
        entry.update(_figures(found, decision), status=status, error=found.failed)
        if status != StepState.running:
            entry["ended_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        save(entry)
        if status != StepState.running:
            return entry


def _decision(found: Evidence, rule: Rule, started: float) -> Any:
    """The sequential rule's decision on the pairs counted so far (``started``: the step's ``time.monotonic()``)."""
    from ddpbench.analysis.sequential import decide

    return decide(found.values, rule.regression_pct, CONFIDENCE, None, rule.min_pairs, rule.max_pairs,
                  (time.monotonic() - started) / 60.0, rule.max_minutes, rule.spending)


def _decided(found: Evidence, rule: Rule, started: float) -> bool:
    """Whether the pairs already run decide the commit (a resumed step that had finished its looks)."""
    return len(found.values) >= rule.min_pairs and _decision(found, rule, started).verdict != Verdict.inconclusive


def _status(found: Evidence, decision: Any, rule: Rule) -> StepStatus:
    if found.failed is not None:
        return StepState.failed
    if decision.verdict != Verdict.inconclusive:
        return Verdict(decision.verdict)
    if decision.stop or found.repeats >= rule.max_pairs:
        return Verdict.inconclusive
    return StepState.running


def _figures(found: Evidence, decision: Any) -> Dict[str, Any]:
    def number(value: float) -> Optional[float]:
        return float(value) if math.isfinite(value) else None

    return {"pairs": found.repeats, "n": len(found.values), "counted": found.counted, "excluded": found.excluded,
            "values": [round(v, 6) for v in found.values], "mean": number(decision.mean),
            "ci_low": number(decision.ci_low), "ci_high": number(decision.ci_high),
            "look_confidence": number(decision.look_confidence), "message": decision.message}
