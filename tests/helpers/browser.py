"""A real headless browser for the tests: Debian's chromium loads a page, dumps its DOM and takes a screenshot.

``chromium()`` returns the executable; when it is missing, under ``CI=true`` the test fails with one line
(``scripts/setup.sh --test`` installs it), elsewhere it skips with one line. ``load(page, work)`` runs one
fresh browser (its own profile in ``work``, no network features, no GPU, no sandbox: tests run as root) on a
local file and returns the DOM after the page loaded (scripts, if any ran, included) and the screenshot.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.slurm import in_ci

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOAD_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Loaded:
    """What the browser made of a page: its DOM as serialised after loading, and a screenshot (PNG)."""

    dom: str
    screenshot: Path


def chromium() -> str:
    """The chromium executable; fails the test under CI=true when missing, else skips it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    reason = "chromium not installed (scripts/setup.sh --test installs it as root: apt-get install chromium)"
    if in_ci():
        pytest.fail(f"browser test under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


def load(page: Path, work: Path, width: int = 1200, height: int = 2400) -> Loaded:
    """Load ``page`` (a local file) in a fresh headless chromium: its DOM and a screenshot."""
    work.mkdir(parents=True, exist_ok=True)
    shot = work / f"{page.stem}.png"
    run = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={work / 'profile'}", f"--window-size={width},{height}",
                          f"--screenshot={shot}", "--dump-dom", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=LOAD_TIMEOUT_S)
    assert run.returncode == 0 and "<html" in run.stdout, f"chromium exited {run.returncode}: {run.stderr[-2000:]}"
    assert shot.is_file() and shot.read_bytes()[:4] == b"\x89PNG", f"no screenshot: {run.stderr[-2000:]}"
    return Loaded(run.stdout, shot)
