"""Which commit a bisection measures next, and what the verdicts so far conclude: pure functions.

The range is the commits after the good one up to the bad one, oldest first (indices 0 … n − 1; n − 1 is
the bad commit). Each measured commit has a verdict: ``over`` (slower than the good commit by more than
``regression_pct``: bad), ``within`` (good) or anything else (``inconclusive``, ``failed``: skipped, as
``git bisect skip`` does). The first bad commit lies after the last good commit before the first bad one
(``lo``) and at or before that bad one (``hi``; the bad end until a commit is measured ``over``). The next
commit is the unmeasured one nearest the middle of that interval; the bad end is measured only when nothing
else is left, so that the verdict names a commit that was measured slower.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Mapping, Optional

OVER, WITHIN = "over", "within"


@dataclass(frozen=True)
class Outcome:
    """Where a bisection stands: ``status`` ``running`` (measure ``next``), ``found`` (``first_bad``),
    ``inconclusive`` (the first bad commit is one of ``candidates``, none measurable) or ``no_regression``
    (the bad commit was measured within ``regression_pct`` of the good one). Indices into the range."""

    status: str
    next: Optional[int] = None
    first_bad: Optional[int] = None
    candidates: List[int] = field(default_factory=list)


def outcome(n: int, verdicts: Mapping[int, str]) -> Outcome:
    """The bisection of a range of ``n`` commits after the verdicts so far (index -> verdict)."""
    if n < 1:
        raise ValueError("a bisection needs at least one commit after the good one")
    bad = sorted(i for i, v in verdicts.items() if v == OVER and 0 <= i < n)
    hi = bad[0] if bad else n - 1
    if not bad and verdicts.get(hi) == WITHIN:
        return Outcome("no_regression")
    lo = max((i for i, v in verdicts.items() if v == WITHIN and i < hi), default=-1)
    unmeasured = [i for i in range(lo + 1, hi) if i not in verdicts]
    if unmeasured:
        middle = (lo + hi) / 2.0
        return Outcome("running", next=min(unmeasured, key=lambda i: (abs(i - middle), i)),
                       candidates=list(range(lo + 1, hi + 1)))
    if hi not in verdicts:
        return Outcome("running", next=hi, candidates=list(range(lo + 1, hi + 1)))
    if verdicts[hi] == OVER and lo + 1 == hi:
        return Outcome("found", first_bad=hi, candidates=[hi])
    return Outcome("inconclusive", candidates=list(range(lo + 1, hi + 1)))
