"""Every relative link of the README and the docs points to a file that exists, and its #anchor to a heading there.

Pure: reads the markdown files only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: an inline markdown link or image: [text](target) with an optional "title"
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def prose_lines(text: str) -> Iterator[Tuple[int, str]]:
    """The page's lines outside fenced code blocks, with their numbers (1-based), inline code removed."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield number, re.sub(r"`[^`]*`", "", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = re.sub(r"[^\w\- ]", "", text.replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path, cache: Dict[Path, Set[str]]) -> Set[str]:
    """The anchors of ``page``'s headings, a repeated heading numbered as GitHub numbers it (``-1``, ``-2``)."""
    if page not in cache:
        seen: Dict[str, int] = {}
        found: Set[str] = set()
        fenced = False
        for line in page.read_text(encoding="utf-8").splitlines():
            if FENCE.match(line):
                fenced = not fenced
                continue
            match = None if fenced else HEADING.match(line)
            if match:
                base = slug(match.group(1))
                found.add(base if base not in seen else f"{base}-{seen[base]}")
                seen[base] = seen.get(base, 0) + 1
        cache[page] = found
    return cache[page]


def broken_links() -> List[str]:
    """Each relative link of PAGES whose file or anchor is missing, as ``page:line: target (why)``."""
    cache: Dict[Path, Set[str]] = {}
    broken = []
    for page in PAGES:
        for number, line in prose_lines(page.read_text(encoding="utf-8")):
            for target in LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto: ...
                path_part, _, anchor = target.partition("#")
                where = (page.parent / path_part).resolve() if path_part else page
                why = ""
                if not where.exists():
                    why = "no such file"
                elif anchor and where.suffix == ".md" and anchor not in anchors(where, cache):
                    why = f"no heading #{anchor} in {where.relative_to(ROOT)}"
                if why:
                    broken.append(f"{page.relative_to(ROOT)}:{number}: {target} ({why})")
    return broken


def test_slug_follows_github() -> None:
    assert slug("Sizes (`model=`)") == "sizes-model"
    assert slug("Verdict: tool comparisons") == "verdict-tool-comparisons"
    assert slug("`cluster.slurm.*` (`SlurmConfig` in `src/ddpbench/config/cluster.py`)") == \
        "clusterslurm-slurmconfig-in-srcddpbenchconfigclusterpy"


def test_every_relative_link_resolves() -> None:
    assert len(PAGES) > 10, PAGES
    broken = broken_links()
    assert not broken, "broken links:\n" + "\n".join(broken)
