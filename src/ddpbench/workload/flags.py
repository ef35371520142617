"""Command-line flags from a frozen dataclass: each field is one ``--flag`` whose default, help, parser or choices
live in the field (:func:`flag`); :func:`add_flags` adds them to argparse, :func:`values_of` reads them back and
:func:`render` writes an instance as the flags that differ from their defaults. Torch-free."""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple

def flag(default: Any, help: str, *, parse: Optional[Callable[[str], Any]] = None,
         choices: Sequence[Any] = (), metavar: Optional[str] = None) -> Any:
    """A dataclass field that is a flag: its ``default``, ``help``, and how its text becomes a value (``parse``,
    e.g. :func:`positive_int`; or one of ``choices``, Choice members or strings; a ``False`` default: a switch)."""
    return dataclasses.field(default=default, metadata={"help": help, "parse": parse, "choices": tuple(choices),
                                                        "metavar": metavar})


def flag_name(field_name: str) -> str:
    """``--batch-size`` for the field ``batch_size``."""
    return "--" + field_name.replace("_", "-")


def _number(convert: Callable[[str], Any], name: str, low: Optional[float] = None, *,
            inclusive: bool = True) -> Callable[[str], Any]:
    """An argparse type named ``name``: ``convert`` (``int``, or ``float`` that must be finite), then at least
    ``low`` (above it where not ``inclusive``)."""

    def parse(text: str) -> Any:
        value = convert(text)
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be finite, got {text}")
        if low is not None and (value < low if inclusive else value <= low):
            raise argparse.ArgumentTypeError(f"must be {'>=' if inclusive else '>'} {low:g}, got {value}")
        return value

    parse.__name__ = name
    return parse


positive_int = _number(int, "positive int", 1)
non_negative_int = _number(int, "non-negative int", 0)
finite_float = _number(float, "float")
positive_float = _number(float, "positive float", 0, inclusive=False)
non_negative_float = _number(float, "non-negative float", 0)


def profiler_schedule(text: str) -> Tuple[int, int, int, int]:
    """torch.profiler's schedule as four integers (ACTIVE >= 1, the others >= 0)."""
    parts = [int(part) for part in text.split(",")]
    if len(parts) != 4 or min(parts) < 0 or parts[2] < 1:
        raise argparse.ArgumentTypeError(f"expected WAIT,WARMUP,ACTIVE,REPEAT (ACTIVE >= 1), got {text}")
    return parts[0], parts[1], parts[2], parts[3]


profiler_schedule.__name__ = "schedule WAIT,WARMUP,ACTIVE,REPEAT"  # argparse quotes a type's name in its errors


class OneLineParser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line on stderr (no usage block), exit status 2."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def add_flags(group: Any, cls: type, skip: Sequence[str] = ()) -> None:
    """Add every flag field of the dataclass ``cls`` (but ``skip``) to the argparse ``group``."""
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        meta, name = field.metadata, flag_name(field.name)
        if field.default is False:
            group.add_argument(name, action="store_true", help=meta["help"])
        elif meta["choices"]:
            group.add_argument(name, choices=[str(c) for c in meta["choices"]], default=field.default,
                               help=meta["help"])
        else:
            group.add_argument(name, type=meta["parse"] or str, default=field.default, help=meta["help"],
                               metavar=meta["metavar"])


def values_of(cls: type, parsed: argparse.Namespace, skip: Sequence[str] = ()) -> Dict[str, Any]:
    """The fields of ``cls`` (but ``skip``) from ``parsed``: a choice as its member of ``choices``."""
    values = {}
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        value = getattr(parsed, field.name)
        values[field.name] = next((c for c in field.metadata["choices"] if str(c) == value), value)
    return values


def render(args: Any) -> List[str]:
    """The command line of the dataclass instance ``args`` (nested ones included): ``--flag=value`` for each field
    whose value is not its default, ``--flag`` for a switch that is on."""
    argv: List[str] = []
    for field in dataclasses.fields(args):
        value = getattr(args, field.name)
        if dataclasses.is_dataclass(value):
            argv += render(value)
        elif value == field.default:
            continue
        elif value is True:
            argv.append(flag_name(field.name))
        elif isinstance(value, tuple):
            argv.append(f"{flag_name(field.name)}={','.join(str(v) for v in value)}")
        else:
            argv.append(f"{flag_name(field.name)}={str(value)}")
    return argv
