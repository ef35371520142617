"""Which commit a bisection measures next, and what the verdicts so far conclude (docs/versions.md).

Indices 0 … n − 1 run over the commits after the good one, n − 1 being the bad one. A verdict other than
``over`` (bad) or ``within`` (good) is skipped, as ``git bisect skip`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Mapping, Optional

from ddpbench.choices import Verdict
from ddpbench.formats.bisect_record import BisectStatus, StepStatus


@dataclass(frozen=True)
class Outcome:
    """Where a bisection stands: ``status`` ``running`` (measure ``next``), ``found`` (``first_bad``),
    ``inconclusive`` (the first bad commit is one of ``candidates``, none measurable) or ``no_regression``
    (the bad commit was measured within ``regression_pct`` of the good one). Indices into the range."""

    status: BisectStatus
    next: Optional[int] = None
    first_bad: Optional[int] = None
    candidates: List[int] = field(default_factory=list)


def outcome(n: int, verdicts: Mapping[int, StepStatus]) -> Outcome:
    """The bisection of a range of ``n`` commits after the verdicts so far (index -> verdict)."""
    if n < 1:
        raise ValueError("a bisection needs at least one commit after the good one")
    bad = sorted(i for i, v in verdicts.items() if v == Verdict.over and 0 <= i < n)
    hi = bad[0] if bad else n - 1
    if not bad and verdicts.get(hi) == Verdict.within:
        return Outcome(BisectStatus.no_regression)
    lo = max((i for i, v in verdicts.items() if v == Verdict.within and i < hi), default=-1)
    unmeasured = [i for i in range(lo + 1, hi) if i not in verdicts]
    if unmeasured:
        middle = (lo + hi) / 2.0
        return Outcome(BisectStatus.running, next=min(unmeasured, key=lambda i: (abs(i - middle), i)),
                       candidates=list(range(lo + 1, hi + 1)))
    if hi not in verdicts:
        return Outcome(BisectStatus.running, next=hi, candidates=list(range(lo + 1, hi + 1)))
    if verdicts[hi] == Verdict.over and lo + 1 == hi:
        return Outcome(BisectStatus.found, first_bad=hi, candidates=[hi])
    return Outcome(BisectStatus.inconclusive, candidates=list(range(lo + 1, hi + 1)))
