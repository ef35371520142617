"""The one reader contract of ddpbench's versioned JSON formats: version check, upgrade, one error type.

:meth:`Format.load` returns a file's record as the current version or raises :class:`FormatError`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple, TypeGuard

from ddpbench.errors import DdpbenchError

#: one upgrade step: a record of version v, as one of version v + 1
Upgrade = Callable[[Dict[str, Any]], Dict[str, Any]]
#: the checks of a record's body: one line per problem, empty when the record is usable
Check = Callable[[Dict[str, Any]], List[str]]


class FormatError(DdpbenchError):
    """A file of a ddpbench format that cannot be used: ``path``, ``schema`` and ``problems`` (one line each)."""

    def __init__(self, path: "str | os.PathLike[str]", schema: str, problems: Sequence[str]) -> None:
        self.path, self.schema, self.problems = str(path), schema, list(problems)
        self.problem = self.problems[0]  # the first problem, one line
        more = f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        super().__init__(f"{self.path} ({schema}): {self.problem}{more}")


def is_number(value: Any) -> TypeGuard[float]:
    """True for a finite int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def number_map_problems(name: str, value: Any, keys: Sequence[str]) -> List[str]:
    """One line per key of ``keys`` that the dict ``value`` lacks or holds no finite number under (none for a
    value that is not a dict: its type check reports it)."""
    if not isinstance(value, dict):
        return []
    return [f"{name}.{key}: missing or not a finite number" for key in keys if not is_number(value.get(key))]


@dataclass(frozen=True)
class Format:
    """A versioned JSON format as data: what :meth:`load` checks and how it upgrades earlier versions."""

    # value of the records' ``schema`` field
    schema: str
    # the version writers write now
    version: int
    # the oldest version readers still accept
    oldest: int
    # version v -> the step turning a record of v into v + 1, for every v from ``oldest`` below ``version``
    upgrades: Mapping[int, Upgrade]
    # the body's checks, run on a record of any known version before it is upgraded
    check: Check = lambda record: []

    def __post_init__(self) -> None:
        missing = [v for v in range(self.oldest, self.version) if v not in self.upgrades]
        if missing:
            raise TypeError(f"{self.schema}: no upgrade step from version(s) {missing} to the next")

    @property
    def known_versions(self) -> FrozenSet[int]:
        """Every version :meth:`load` reads."""
        return frozenset(range(self.oldest, self.version + 1))

    def identity_problem(self, record: Any) -> Optional[str]:
        """Why ``record`` is not a record of this format in a known version (one line), or None."""
        if not isinstance(record, dict):
            return f"not a JSON object ({type(record).__name__})"
        if record.get("schema") != self.schema:
            return f"unknown schema {record.get('schema')!r} (expected {self.schema!r})"
        version = record.get("schema_version")
        if isinstance(version, bool) or version not in self.known_versions:
            known = ", ".join(str(v) for v in sorted(self.known_versions))
            return f"unknown schema_version {version!r} of {self.schema} (this reader knows {known})"
        return None

    def problems(self, record: Any) -> List[str]:
        """Every problem of a decoded record, the identity's first; empty when it is usable."""
        identity = self.identity_problem(record)
        if not isinstance(record, dict):
            return [str(identity)]
        return ([identity] if identity else []) + self.check(record)

    def first_problem(self, record: Any) -> Optional[str]:
        """Why a decoded record cannot be used (one line), or None when it can."""
        problems = self.problems(record)
        return problems[0] if problems else None

    def upgrade(self, record: Mapping[str, Any]) -> Dict[str, Any]:
        """A usable record of any known version as the current version (a new dict; ``schema_version`` kept)."""
        upgraded = dict(record)
        for version in range(int(record["schema_version"]), self.version):
            upgraded = self.upgrades[version](upgraded)
        return upgraded

    def load(self, path: "str | os.PathLike[str]") -> Dict[str, Any]:
        """The record in ``path`` as the current version; :class:`FormatError` when it cannot be used."""
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise FormatError(path, self.schema, [f"unreadable: {exc.strerror or exc}"]) from None
        if not data.strip():
            raise FormatError(path, self.schema, ["empty file"])
        try:
            record = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FormatError(path, self.schema, [f"malformed JSON: {exc}"]) from None
        problems = self.problems(record)
        if problems:
            raise FormatError(path, self.schema, problems)
        return self.upgrade(record)

    def read(self, path: "str | os.PathLike[str]") -> Tuple[Optional[Dict[str, Any]], Optional[FormatError]]:
        """``(record, None)`` as :meth:`load` returns it, or ``(None, error)``: for readers that skip a bad file."""
        try:
            return self.load(path), None
        except FormatError as error:
            return None, error

    def read_problem(self, path: "str | os.PathLike[str]") -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
        """``(record, None)`` as :meth:`load` returns it, or ``(None, why)``: the first problem, one line."""
        record, error = self.read(path)
        return record, (error.problem if error is not None else None)

    def read_if_present(self, path: "str | os.PathLike[str]") -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
        """``(record, None)``; ``(None, None)`` when ``path`` does not exist; ``(None, why)`` (naming the file)."""
        if not os.path.exists(path):
            return None, None
        record, error = self.read(path)
        return record, (str(error) if error is not None else None)
