"""Pure job ordering for paired sweeps: repeat ranges, Williams designs, paired order.

Repeat r runs its modes in row ``(r - 1) mod rows`` of a Williams design (Williams 1949), balanced for
position and carry-over: two modes run A,B on odd repeats and B,A on even ones. Re-running one repeat
reproduces its order.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, TypeVar

_RANGE = re.compile(r"^\s*(-?\d+)\s*-\s*(-?\d+)\s*$")
_INT = re.compile(r"^\s*-?\d+\s*$")


class SweepOrderError(ValueError):
    """A sweep argument that cannot be ordered (bad repeat range...): one-line message."""


def expand_repeat(values: Iterable[str]) -> List[int]:
    """Expand repeat labels: ``"1-5"`` -> 1..5 inclusive, ``"3"`` -> 3; duplicates are an error."""
    out: List[int] = []
    for raw in values:
        text = str(raw)
        match = _RANGE.match(text)
        if match:
            low, high = int(match.group(1)), int(match.group(2))
            if low > high:
                raise SweepOrderError(f"repeat={text}: range start {low} is after its end {high}; write {high}-{low}")
            out.extend(range(low, high + 1))
        elif _INT.match(text):
            out.append(int(text))
        else:
            raise SweepOrderError(f"repeat={text}: not an integer or a range A-B (e.g. repeat=1-5, repeat=1,2,3)")
    if any(r < 1 for r in out):
        raise SweepOrderError(f"repeat={','.join(map(str, values))}: repeat labels must be >= 1")
    if len(set(out)) != len(out):
        raise SweepOrderError(f"repeat={','.join(map(str, values))}: a repeat label appears twice")
    return out


def williams_rows(n: int) -> List[List[int]]:
    """Rows of a Williams design for ``n`` treatments (n rows when n is even, 2n when odd)."""
    if n <= 0:
        return []
    first = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]  # 0, 1, n-1, 2, n-2, ...
    rows = [[(value + shift) % n for value in first] for shift in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 and n > 1 else rows


T = TypeVar("T")


def mode_order(modes: Sequence[T], repeat: int) -> List[T]:
    """The order in which repeat ``repeat`` runs ``modes``."""
    rows = williams_rows(len(modes))
    row = rows[(repeat - 1) % len(rows)]
    return [modes[i] for i in row]


@dataclass(frozen=True)
class OrderedJob:
    """One job of the sweep: its overrides and its position within its pair (group of modes)."""

    overrides: Tuple[str, ...]
    pair_position: int


def quote_value(value: str) -> str:
    """An override value Hydra reads back as the same string (quoted, its quotes escaped)."""
    return "'" + str(value).replace("'", "\\'") + "'"


def expand_arms(modes: Sequence[str], versions: Mapping[str, Sequence[str]],
                mode_key: str = "mode") -> List[Tuple[str, Optional[str]]]:
    """The arms of a sweep: each mode once, a mode named in ``versions`` once per version spec, in order.

    Raises SweepOrderError for a ``versions`` mode the sweep does not run, an empty list or a repeated spec.
    """
    for mode, specs in versions.items():
        if mode not in modes:
            raise SweepOrderError(f"versions: mode {mode} is not one of {mode_key}={','.join(modes)}")
        texts = [str(spec).strip() for spec in specs]
        if not texts:
            raise SweepOrderError(f"versions: mode {mode} lists no version")
        if len(set(texts)) != len(texts):
            raise SweepOrderError(f"versions: mode {mode} lists a version twice ({', '.join(texts)})")
    arms: List[Tuple[str, Optional[str]]] = []
    for mode in modes:
        arms += [(mode, str(spec).strip()) for spec in versions[mode]] if mode in versions else [(mode, None)]
    return arms


def order_jobs(
    swept: Dict[str, List[str]], mode_key: str = "mode", repeat_key: str = "repeat",
    versions: Optional[Mapping[str, Sequence[str]]] = None, version_key: str = "version",
) -> List[OrderedJob]:
    """Order jobs: other keys vary slowest (in the order given), then repeats, then arms in pairs.

    ``swept`` maps each override key to its list of ``key=value`` strings (single values too),
    in command-line order. ``versions`` (mode -> version specs) makes each spec of a mode an arm of its
    own in the same Williams-ordered block; its jobs get ``version_key='<spec>'``.
    """
    modes: Optional[List[str]] = None
    repeats: Optional[List[int]] = None
    others: List[List[str]] = []
    for key, items in swept.items():
        values = [item.split("=", 1)[1] for item in items]
        if key == mode_key:
            modes = values
        elif key == repeat_key:
            repeats = expand_repeat(values)
        else:
            others.append(list(items))
    if modes is not None and len(set(modes)) != len(modes):
        raise SweepOrderError(f"{mode_key}={','.join(modes)}: a mode appears twice")
    if versions and modes is None:
        raise SweepOrderError(f"versions: needs the modes it versions in the sweep ({mode_key}=...)")
    arms = expand_arms(modes, versions or {}, mode_key) if modes is not None else None
    jobs: List[OrderedJob] = []
    for combo in itertools.product(*others):
        for repeat in repeats if repeats is not None else [None]:
            ordered = mode_order(arms, repeat if repeat is not None else 1) if arms else [None]
            for position, arm in enumerate(ordered):
                overrides = list(combo)
                if arm is not None:
                    overrides.append(f"{mode_key}={arm[0]}")
                    if arm[1] is not None:
                        overrides.append(f"{version_key}={quote_value(arm[1])}")
                if repeat is not None:
                    overrides.append(f"{repeat_key}={repeat}")
                jobs.append(OrderedJob(tuple(overrides), position))
    return jobs
