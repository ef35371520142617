"""``repeat=auto`` with ``precision.disturbed=rerun``: which pairs are re-run instead of counted. Pure.

A pair here is every trial of one condition and repeat; :func:`rerun_pairs` turns ``stopping.json``'s ``excluded``
list into the pairs the analysis leaves out."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ddpbench.analysis.disturbance import trial_disturbance_of
from ddpbench.analysis.results import RERUN, ExcludedPair, PairRecord
from ddpbench.choices import TrialStatus

Sides = tuple[Mapping[str, Any], Mapping[str, Any]]
"""The baseline's and the compared mode's trial rows of one pair."""
RerunKey = tuple[str, str, int]
"""(sweep_dir, condition_id, repeat) of a pair the sweep re-ran."""


def repeat_disturbance(rows: Sequence[Mapping[str, Any]], baseline: str) -> str | None:
    """Why the pair made of ``rows`` (one condition's and repeat's trials) is disturbed, naming the disturbed
    trials' modes, the baseline first; None when it is not, or when a trial is not ``ok`` (then it is unpaired)."""
    if any(row.get("status") != TrialStatus.ok for row in rows):
        return None
    ordered = sorted(rows, key=lambda r: (str(r.get("mode")) != baseline, str(r.get("mode"))))
    parts = [f"{row.get('mode')} trial: {why}" for row in ordered if (why := trial_disturbance_of(row))]
    return "; ".join(parts) if parts else None


def disturbed_repeats(pairs: Sequence[PairRecord], sides: Mapping[tuple[str, str, int, str], Sides],
                      baseline: str) -> dict[int, str]:
    """Repeat → why, for every disturbed pair among ``pairs`` (one condition's; ``sides`` as
    :func:`ddpbench.analysis.pairing.pair_table` gives them: the trials each pair used)."""
    trials: dict[int, dict[str, Mapping[str, Any]]] = {}
    for p in pairs:
        base, mode = sides[(p.sweep_dir, p.condition_id, p.repeat, p.mode)]
        trials.setdefault(p.repeat, {}).update({baseline: base, p.mode: mode})
    found = {repeat: repeat_disturbance(list(by_mode.values()), baseline) for repeat, by_mode in sorted(trials.items())}
    return {repeat: why for repeat, why in found.items() if why}


def rerun_reason(repeat: int, why: str) -> str:
    """The one line the report and ``stopping.json`` readers show for a re-run pair."""
    return f"pair {repeat} disturbed ({why}): re-run, not counted"


def is_rerun(excluded: ExcludedPair) -> bool:
    """Whether the analysis left ``excluded`` out because the sweep re-ran it."""
    return excluded.cause == RERUN


def excluded_text(excluded: ExcludedPair) -> str:
    """Why ``excluded`` is not in the statistics, as the report says it."""
    return rerun_reason(excluded.repeat, excluded.reason) if is_rerun(excluded) else excluded.reason


def rerun_pairs(record: Mapping[str, Any], sweep_dirs: Iterable[str]) -> dict[RerunKey, str]:
    """The pairs a ``stopping.json`` ``record`` lists as excluded, keyed for the analysis, with why each was
    disturbed; ``sweep_dirs``: the trials' own ``sweep_dir`` values there (the dir may have moved since)."""
    out: dict[RerunKey, str] = {}
    dirs = sorted(set(sweep_dirs))
    for condition in record.get("conditions") or []:
        condition_id = condition.get("condition_id")
        if condition_id is None:
            continue
        for entry in condition.get("excluded") or []:
            repeat = int(entry["repeat"])
            for sweep_dir in dirs:
                out[(sweep_dir, str(condition_id), repeat)] = str(entry.get("why", ""))
    return out


def leave_out(pairs: Sequence[PairRecord], excluded: Sequence[ExcludedPair],
              rerun: Mapping[RerunKey, str]) -> tuple[list[PairRecord], list[ExcludedPair]]:
    """``(pairs, excluded)`` with every pair of ``rerun`` moved from the first to the second (cause :data:`RERUN`)."""
    def key(p: PairRecord) -> RerunKey:
        return p.sweep_dir, p.condition_id, p.repeat

    moved = [ExcludedPair(*key(p), p.mode, rerun[key(p)], RERUN) for p in pairs if key(p) in rerun]
    return [p for p in pairs if key(p) not in rerun], [*excluded, *moved]
