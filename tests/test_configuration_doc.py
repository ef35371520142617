"""docs/configuration.md names every config group's options and every key of the config, and only keys that exist.

Pure: reads conf/, the schema's dataclasses and the page; composes nothing and starts no process.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set

import yaml

from ddpbench.config.schema import DdpbenchConfig

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
PAGE = ROOT / "docs" / "configuration.md"
#: backticked names in a table cell
CODE = re.compile(r"`([^`]+)`")


def table_rows(heading: str) -> List[List[str]]:
    """The cells of every body row of the table under ``## heading`` in the page."""
    section = PAGE.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split(" | ")]
            for line in section.splitlines() if line.startswith("| ")]
    return [cells for cells in rows[1:] if not set(cells[0]) <= {"-", "|"}]  # past the header and its rule


def group_options() -> Dict[str, Set[str]]:
    """Each config group of conf/ (``cluster``, ``hydra/sweeper``) and the option files in it."""
    groups: Dict[str, Set[str]] = {}
    for path in CONF.rglob("*.yaml"):
        if path.parent != CONF:
            groups.setdefault(path.parent.relative_to(CONF).as_posix(), set()).add(path.stem)
    return groups


def top_level_keys() -> Set[str]:
    """The keys of the composed config: the schema's fields and conf/config.yaml's own keys."""
    own = yaml.safe_load((CONF / "config.yaml").read_text(encoding="utf-8"))
    return {f.name for f in dataclasses.fields(DdpbenchConfig)} | (set(own) - {"defaults", "hydra"})


def documented_names(cell: str) -> Iterator[str]:
    """The dotted key names a Keys table's first cell gives: braces expanded (``a.{b,c}``), a name that starts
    with a dot continued from the one before it (``x.y.a``, ``.b``), ``key=option`` read as ``key``."""
    previous = ""
    for name in CODE.findall(cell):
        name = name.split("=", 1)[0]
        if name.startswith("."):
            name = previous.rsplit(".", 1)[0] + name
        previous = name
        braces = re.fullmatch(r"(.*)\{(.*)\}", name)
        if braces:
            yield from (braces.group(1) + part for part in braces.group(2).split(","))
        else:
            yield name


def schema_field(path: str) -> Optional[str]:
    """Why the dotted ``path`` (a trailing ``.*``: every key under it) is no key of the schema; None when it is."""
    node: typing.Any = DdpbenchConfig
    parts = path.split(".")
    for depth, part in enumerate(parts):
        if part == "*" and depth == len(parts) - 1 and dataclasses.is_dataclass(node):
            return None
        if not (isinstance(node, type) and dataclasses.is_dataclass(node)):
            return f"{'.'.join(parts[:depth])} has no keys under it"
        hints = typing.get_type_hints(node)
        if part not in hints:
            return f"{'.'.join(parts[:depth]) or 'the config'} has no key {part!r}"
        node = hints[part]
        args = [a for a in typing.get_args(node) if a is not type(None)]
        if typing.get_origin(node) is typing.Union and len(args) == 1:
            node = args[0]  # Optional[SomeConfig]
    return None


def test_every_option_file_is_named_in_its_group_row() -> None:
    rows = {cells[0].strip("`"): " | ".join(cells[1:]) for cells in table_rows("Groups")}
    missing = [f"{group}: the Groups table has no row" for group in group_options() if group not in rows]
    missing += [f"{group}={option}" for group, options in sorted(group_options().items()) if group in rows
                for option in sorted(options) if option not in CODE.findall(rows[group])]
    assert not missing, f"docs/configuration.md does not name: {', '.join(missing)}"
    assert {"mode", "cluster", "hydra/launcher"} <= set(group_options()), "conf/ was not read as expected"


def test_every_top_level_key_is_named() -> None:
    named = {name.split(".", 1)[0] for cells in table_rows("Groups") + table_rows("Keys")
             for name in documented_names(cells[0])}
    missing = sorted(top_level_keys() - named)
    assert not missing, f"docs/configuration.md names no key of: {', '.join(missing)}"
    assert {"repeat", "tool", "cluster", "regression_pct"} <= top_level_keys(), "the schema was not read as expected"


def test_every_key_the_page_names_exists() -> None:
    names = [name for cells in table_rows("Keys") for name in documented_names(cells[0])
             if not name.startswith("hydra.")]
    wrong = [f"{name} ({why})" for name in names for why in [schema_field(name)] if why]
    assert not wrong, f"docs/configuration.md names keys the config lacks: {'; '.join(wrong)}"
    assert "model.transformer.d_model" in names and "tool.torch_profiler.handler" in names, names
