"""ddpbench-bisect: the search (pure), its record, bad input, and a real bisection of a git repository the test builds.

The repository holds a small tool, ``steptool``: its launcher runs torchrun with the workload waiting STEP_MS in
every step, read from its source. One commit of five doubles STEP_MS; the bisection must name it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Dict, List, Mapping, Optional

import pytest

from helpers.cli import CliRun, run_ddpbench
from ddpbench.bisect import search
from ddpbench.bisect.cli import split_overrides
from ddpbench.bisect.step import Rule, pair_value
from ddpbench.choices import Verdict
from ddpbench.errors import ConfigError
from ddpbench.formats import bisect_record
from ddpbench.formats.bisect_record import BisectStatus, StepState, StepStatus
from ddpbench.report.bisect import bisect_markdown

TOOL_FILES = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "steptool"\nversion = "0.1.0"\n\n[tool.setuptools]\npackages = ["steptool"]\n',
    "steptool/__init__.py": "",
    "steptool/cost.py": "STEP_MS = 40.0\n",
    "steptool/run.py": '"""steptool\'s launcher: torchrun, with the workload waiting STEP_MS in every step."""\n'
                       "import runpy\nimport sys\n\nfrom steptool.cost import STEP_MS\n\n"
                       'sys.argv = ["torchrun", *sys.argv[1:], f"--inject-step-ms={STEP_MS}"]\n'
                       'runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)\n',
}
#: the commits after the good one: (message, files changed); the second is the one that makes each step slower
CHANGES = [("add a README", {"README": "docs\n"}),
           ("wait 40 ms more per step", {"steptool/cost.py": "STEP_MS = 80.0\n"}),
           ("more docs", {"README": "docs\nmore\n"}),
           ("comment the launcher", {"steptool/run.py": TOOL_FILES["steptool/run.py"] + "# the end\n"})]
MODE_YAML = """defaults:
  - native
  - _self_
name: steptool
role: tool
description: a small tool whose launcher makes each step wait STEP_MS (from its source)
requires: steptool
requires_package: steptool
command: ["{python}", "-m", "steptool.run", "--nnodes={nnodes}", "--nproc-per-node={nproc_per_node}",
          "--node-rank={node_rank}", "--master-addr={master_addr}", "--master-port={master_port}",
          "{script}", "{workload_args}"]
switch: {what: inject, stays_on: "nothing"}
"""
#: one rank, the tiny model, few steps; a clear regression (+40 ms on a ~42 ms step: the tool's wait dominates the
#: step, so a loaded shared machine moves it little) against 25 %; pairs on a busy machine are counted
CHEAP = ["model=tiny", "stop.steps=15", "stop.warmup_steps=2", "trial.log_every=0", "cluster.nproc_per_node=1",
         "regression_pct=25", "precision.min_pairs=2", "precision.max_pairs=6", "precision.disturbed=count"]


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.fixture(scope="module")
def tool_repo(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """The steptool repository: ``good`` tag, then :data:`CHANGES`; commit hashes by message, and its path."""
    repo = tmp_path_factory.mktemp("repos") / "steptool"
    repo.mkdir()
    write(repo, TOOL_FILES)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "steptool 0.1")
    git(repo, "tag", "good")
    commits = {"good": git(repo, "rev-parse", "HEAD"), "repo": str(repo)}
    for message, files in CHANGES:
        write(repo, files)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message)
        commits[message] = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "bad")
    return commits


def run_bisect(args: List[str], cwd: Path, env: Optional[Mapping[str, str]] = None, timeout: float = 1500,
               pin: bool = True) -> CliRun:
    return run_ddpbench(args, cwd, timeout, env, module="ddpbench.bisect", pin=pin)


def test_search_names_the_first_bad_commit_in_few_steps() -> None:
    truth = [Verdict.within, Verdict.over, Verdict.over, Verdict.over]
    verdicts: Dict[int, StepStatus] = {}
    while (found := search.outcome(len(truth), verdicts)).status == BisectStatus.running:
        assert found.next is not None and found.next not in verdicts
        verdicts[found.next] = truth[found.next]
    assert found.status == BisectStatus.found and found.first_bad == 1 and len(verdicts) == 2
    assert search.outcome(4, {0: Verdict.within, 1: Verdict.within, 2: Verdict.within, 3: Verdict.within}).status \
        == BisectStatus.no_regression
    # the bad end is measured before the search names it
    assert search.outcome(3, {0: Verdict.within, 1: Verdict.within}).next == 2
    assert search.outcome(3, {0: Verdict.within, 1: Verdict.within, 2: Verdict.over}).first_bad == 2


def test_commits_without_a_verdict_leave_candidates() -> None:
    # 1 could not be decided: the first bad commit is 1 or 2
    skipped = search.outcome(4, {1: Verdict.inconclusive, 2: Verdict.over, 0: Verdict.within})
    assert skipped.status == BisectStatus.inconclusive and skipped.candidates == [1, 2]
    # an undecided commit is stepped around: the next is another candidate
    assert search.outcome(8, {3: StepState.failed}).next in (2, 4)
    assert search.outcome(1, {0: Verdict.inconclusive}).candidates == [0]
    with pytest.raises(ValueError):
        search.outcome(0, {})


def test_pair_values_between_and_within_trials() -> None:
    class Pair:
        step_overhead_pct = 12.5

    rule = Rule(10.0, 3, 6, 60.0, "pocock", "count", switched=False)
    assert pair_value(Pair(), None, rule) == 12.5
    switched = Rule(10.0, 3, 6, 60.0, "pocock", "count", switched=True)
    good = {"switched_step_overhead_ms": 10.0, "switched_off_step_ms": 2.0}
    candidate = {"switched_step_overhead_ms": 16.0, "switched_off_step_ms": 3.0}
    assert pair_value(Pair(), (good, candidate), switched) == pytest.approx(50.0)  # +6 ms on a 12 ms step


def test_overrides_the_bisection_sets_itself_are_refused() -> None:
    assert split_overrides(["model=tiny", "sweep_name=find-it"]) == (["model=tiny"], "find-it")
    for bad in (["repeat=1-3"], ["baseline=native"], ["versions={x:[1]}"], ["-m"], ["sweep_name=a/b"]):
        with pytest.raises(ConfigError):
            split_overrides(bad)


def test_record_is_versioned_and_rendered(tmp_path: Path) -> None:
    commit = "a" * 40
    inputs = {"name": "b", "mode": "steptool", "package": "steptool", "repo": "/r",
              "good": {"ref": "good", "commit": "g" * 40, "subject": "start"},
              "bad": {"ref": "bad", "commit": commit, "subject": "slow | fast"},
              "commits": [{"commit": commit, "subject": "slow | fast"}], "overrides": ["model=tiny"],
              "config_dir": None, "rule": {"metric": "step_overhead_pct", "switched": False, "regression_pct": 1.0,
                                           "confidence": 0.95, "min_pairs": 3, "max_pairs": 12, "max_minutes": 60.0,
                                           "spending": "pocock", "disturbed": "rerun"}}
    step = {"commit": commit, "subject": "slow | fast", "index": 0, "sweep_dir": "/s", "status": "over", "n": 3,
            "pairs": 3, "mean": 40.0, "ci_low": 30.0, "ci_high": 50.0}
    record = bisect_record.build_bisect_record(inputs, [step], {"status": "found", "first_bad": commit,
                                                                "candidates": [commit], "message": "first bad"},
                                               "t0", "t1", "0")
    bisect_record.write_bisect_record(tmp_path, record)
    read, problem = bisect_record.read_bisect_record(tmp_path)
    assert problem is None and read == record
    assert bisect_record.validate_bisect_record({**record, "steps": [{**step, "status": "maybe"}]}) is not None
    text = bisect_markdown(record)
    assert "+40 % [+30, +50]" in text and "slow \\| fast" in text and "**first bad**" in text


@pytest.mark.slow  # runs ddpbench to compose the overrides
def test_bad_input_is_one_line(tool_repo: Dict[str, str], tmp_path: Path) -> None:
    repo = tool_repo["repo"]
    cases = [
        (["traceml", f"{repo}@bad", f"{repo}@good"], "is not an ancestor"),
        (["traceml", f"{repo}@good", f"{repo}@good"], "the same commit"),
        (["traceml", f"{repo}@good", f"{repo}@nosuchref"], "no commit 'nosuchref'"),
        (["traceml", f"{tmp_path}@good", f"{repo}@bad"], "is not a git repository"),
        (["native", f"{repo}@good", f"{repo}@bad"], "names no requires_package"),
        (["nosuchmode", f"{repo}@good", f"{repo}@bad"], "do not compose"),
        (["traceml", f"{repo}@good", f"{repo}@bad", "repeat=1-3"], "repeat= is set by the bisection"),
        (["traceml", f"{repo}@good"], "the following arguments are required"),
    ]
    for args, expected in cases:
        run = run_bisect(args, tmp_path, timeout=120, pin=False)  # nothing runs: the arguments stay as written
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert run.returncode == 2 and len(lines) == 1 and expected in lines[0], (args, run.stderr)
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow  # a real bisection: real sweeps of a tool built at each commit measured
def test_bisection_finds_the_commit_that_made_each_step_slower(tool_repo: Dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "conf" / "mode").mkdir(parents=True)
    (tmp_path / "conf" / "mode" / "steptool.yaml").write_text(MODE_YAML)
    env = {"DDPBENCH_ENV_CACHE": str(tmp_path / "envs")}
    repo, slower = tool_repo["repo"], tool_repo["wait 40 ms more per step"]
    args = ["steptool", f"{repo}@good", f"{repo}@bad", "--config-dir", str(tmp_path / "conf"), *CHEAP,
            "sweep_name=find-it"]
    run = run_bisect(args, tmp_path, env)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert f"ddpbench-bisect: first bad commit: {slower} \"wait 40 ms more per step\"" in run.stdout, run.stdout[-3000:]
    folder = tmp_path / "outputs" / "bisect" / "find-it"
    record = json.loads((folder / "bisect.json").read_text())
    assert record["schema"] == "ddpbench.bisect" and record["result"]["first_bad"] == slower
    measured = {step["commit"]: step for step in record["steps"]}
    assert measured[slower]["status"] == "over" and measured[slower]["ci_low"] > 25
    assert measured[tool_repo["add a README"]]["status"] == "within"
    assert len(record["steps"]) == 2  # the middle commit first, then the one before it
    for step in record["steps"]:
        assert f"{step['commit'][:12]} \"{step['subject']}\":" in run.stdout  # each commit's figure and interval
        assert (Path(step["sweep_dir"]) / "report.md").exists()
    assert slower in (folder / "report.md").read_text()
    # the same name again: every commit is decided already, nothing runs
    again = run_bisect(args, tmp_path, env, timeout=300)
    assert again.returncode == 0 and "2 commit(s) already decided" in again.stdout, again.stdout + again.stderr
    assert "start" not in again.stdout and f"first bad commit: {slower}" in again.stdout
