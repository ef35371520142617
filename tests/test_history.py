"""The history across sweeps: step detection (pure, on synthetic series), the page, and the page in a real browser."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from helpers import browser
from helpers.trials import write_versions_sweep
from ddpbench.analysis.changepoint import MIN_POINTS_FOR_SPREAD, find_steps
from ddpbench.analysis.history import history
from ddpbench.collect.collector import collect_trials
from ddpbench.report.cli import main as report_main

#: markup and script where a record's strings go: a page that runs it changes its title
SCRIPT = "<script>document.title='pwned'</script>"
MARKUP = f"<b>bold</b>{SCRIPT}<img src=x onerror=\"document.title='pwned'\">"
TITLE = "ddpbench overhead history"


def _tags(html: str) -> list[str]:
    """Every tag of an HTML text (escaped text holds none)."""
    return re.findall(r"<[^>]+>", html)


def _no_markup_from_records(html: str) -> None:
    tags = [t.lower() for t in _tags(html)]
    assert not [t for t in tags if t.startswith(("<script", "<b>", "<i>")) or "onerror" in t or "src=x" in t], tags


def _series(levels: list[float], se: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(level + rng.normal(0.0, se)) for level in levels]


def test_a_step_is_placed_with_its_interval() -> None:
    means = _series([0.5] * 5 + [1.5] * 5, 0.1, seed=1)
    fit = find_steps(means, [0.1] * 10, [5] * 10)
    assert [s.index for s in fit.steps] == [5] and fit.steps[0].ci_low < 1.0 < fit.steps[0].ci_high
    assert fit.steps[0].p_value < 0.05 and [(a, b) for a, b, _ in fit.levels] == [(0, 4), (5, 9)]
    assert fit.spread_estimated and len(fit.tested) == 10 >= MIN_POINTS_FOR_SPREAD


def test_flat_series_and_points_without_an_interval() -> None:
    means = _series([0.5] * 8, 0.1, seed=2)
    assert find_steps(means, [0.1] * 8, [5] * 8).steps == ()
    # a point of one pair has no interval: shown, not tested (its huge value moves nothing)
    fit = find_steps([*means[:4], 50.0, *means[4:]], [0.1] * 4 + [float("nan")] + [0.1] * 4, [5] * 4 + [1] + [5] * 4)
    assert fit.steps == () and 4 not in fit.tested
    few = find_steps(means[:3], [0.1] * 3, [5] * 3)
    assert not few.spread_estimated and few.spread == 0.0


def test_a_slow_drift_is_seen_where_neighbouring_intervals_overlap() -> None:
    means = [0.5 + 0.15 * i for i in range(12)]  # 0.15 ms per version: each interval overlaps its neighbour's
    se = [0.12] * 12
    assert all(abs(b - a) < 1.96 * (s + t) for a, b, s, t in zip(means, means[1:], se, se[1:]))
    assert find_steps(means, se, [5] * 12).steps


def test_false_alarm_rate_near_alpha() -> None:
    """No step, a spread between sweeps twice the points' own errors: about 5 % of series show one."""
    rng = np.random.default_rng(7)
    alarms = 0
    for i in range(100):
        se = 0.2 * np.sqrt(rng.chisquare(4, 8) / 4)
        means = rng.normal(0.0, np.sqrt(0.2 ** 2 + 0.4 ** 2), 8)
        alarms += bool(find_steps(means, se, [5] * 8, draws=200, seed=i).steps)
    assert alarms <= 12, alarms  # binomial(100, 0.05): 12 or more has probability < 0.1 %


def _marked_history(root: Path) -> Path:
    """Seven sweeps of one tool, a step at 0.5.0, every record string that reaches the page holding markup."""
    dirs = []
    rng = np.random.default_rng(3)
    for i, (version, cost) in enumerate([("0.3.0", 0.5), ("0.3.5", 0.55), ("0.4.0", 0.5), ("0.4.2", 0.5),
                                         ("0.5.0", 1.6), ("0.5.1", 1.6), ("0.6.0", 1.55)]):
        native = [10.0 + float(rng.normal(0, 0.2)) for _ in range(4)]
        arm = f"traceml=={version}"
        sweep = write_versions_sweep(root, f"sweep-{i}-<i>&'\"x", {
            "native": native, arm: [n + cost + float(rng.normal(0, 0.15)) for n in native]},
            versions={"traceml": [version]}, date=f"2026-11-{i + 1:02d}", cpu=f"cpu {MARKUP}")
        for path in sweep.glob("*/trial.json"):
            trial = json.loads(path.read_text())
            if trial["mode"] == arm:
                trial["arm"]["spec"] = f"{version}{SCRIPT}"
                trial["config"]["mode"].update(description=MARKUP, command=["{python}", "-c", SCRIPT])
            path.write_text(json.dumps(trial))
        dirs.append(sweep)
    out = root / "page"
    assert report_main(["--history", *map(str, dirs), "--out", str(out)]) == 0
    return out / "index.html"


def test_history_page_is_self_contained_and_escaped(tmp_path: Path) -> None:
    page = _marked_history(tmp_path).read_text()
    _no_markup_from_records(page)
    assert page.count("&lt;script&gt;document.title=") >= 3  # hardware, spec, description, command
    links = [m for tag in _tags(page) for m in re.findall(r"\b(?:src|href)=(\S+)", tag)]
    assert links and all(v.startswith(('"data:image/png;base64,', '"#')) for v in links), links  # nothing fetched
    assert "Content-Security-Policy" in page and "http://" not in page and "https://" not in page
    assert "Regressions (1)" in page and "0.4.2 (2026-11-04)" in page and "0.5.0 (2026-11-05)" in page
    points = history(collect_trials([tmp_path]).frame).points
    assert [p.step_change for p in points] == [False] * 4 + [True] + [False] * 2
    assert (tmp_path / "page" / "history.md").read_text().count("**yes**") == 1
    assert report_main(["--history", str(tmp_path), "--job-hours", "0", "--out", str(tmp_path / "x")]) == 2
    mask = os.umask(0o022)
    os.umask(mask)
    assert (tmp_path / "page" / "index.html").stat().st_mode & 0o777 == 0o666 & ~mask  # readable as open() makes it


@pytest.mark.slow  # launches a browser
def test_history_page_in_a_browser(tmp_path: Path) -> None:
    browser.chromium()  # skips (fails under CI=true) before building anything when there is none
    page = _marked_history(tmp_path)
    loaded = browser.load(page, tmp_path / "browser")
    assert re.search(r"<title>(.*?)</title>", loaded.dom).group(1) == TITLE  # type: ignore[union-attr]
    _no_markup_from_records(loaded.dom)
    assert loaded.dom.count("&lt;script&gt;document.title='pwned'&lt;/script&gt;") >= 3  # shown as text
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', loaded.dom)) == 1  # one series
    assert loaded.screenshot.stat().st_size > 50_000  # a page with a plot drawn, not a blank one
    # escaping alone holds: without the page's Content-Security-Policy no script runs either
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text()))
    again = browser.load(bare, tmp_path / "browser-bare")
    assert "Content-Security-Policy" not in again.dom and f"<title>{TITLE}</title>" in again.dom
    _no_markup_from_records(again.dom)
