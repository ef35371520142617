"""A bisection from start to verdict: the commits measured in the order the search asks, the record
(``bisect.json``, written after every look, so that the same name resumes it) and the report."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping

from ddpbench import __version__
from ddpbench.bisect import search
from ddpbench.bisect.commits import Commit
from ddpbench.bisect.step import Plan, measure
from ddpbench.errors import ConfigError
from ddpbench.choices import Verdict
from ddpbench.formats.bisect_record import (BisectStatus, StepState, StepStatus, build_bisect_record, read_bisect_record,
                                             step_status, write_bisect_record)
from ddpbench.formats.condition import arm_name
from ddpbench.io import write_text_atomic
from ddpbench.report.bisect import bisect_markdown, figure

#: the inputs that make two runs of one name the same bisection
SAME_INPUTS = ("mode", "repo", "good", "bad", "commits", "overrides", "rule")
#: the exit status of each outcome
EXIT_CODES = {BisectStatus.found: 0, BisectStatus.inconclusive: 3, BisectStatus.no_regression: 3}
REPORT_FILE = "report.md"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def verdict_words(step: Mapping[str, Any], regression_pct: float) -> str:
    """What a step's status means, in words."""
    words: Dict[StepStatus, str] = {Verdict.over: f"slower by more than {regression_pct:g} %: bad",
                                    Verdict.within: f"not slower by more than {regression_pct:g} %: good",
                                    Verdict.inconclusive: "no verdict within the limits: skipped",
                                    StepState.failed: f"a trial failed ({step.get('error')}): skipped",
                                    StepState.running: "measuring"}
    return words[step_status(str(step["status"]))]


class Bisection:
    """One bisection: its inputs (as the record keeps them), its folder, its plan and its progress lines."""

    def __init__(self, inputs: Dict[str, Any], commits: List[Commit], plan: Plan,
                 say: Callable[[str], None] = print) -> None:
        self.inputs, self.commits, self.plan, self.say = inputs, commits, plan, say
        self.folder = plan.folder
        self.started_at = _now()
        self.steps: List[Dict[str, Any]] = []
        self.result: Dict[str, Any] = {"status": BisectStatus.running, "first_bad": None, "candidates": [], "message": ""}

    def load(self) -> None:
        """Take the steps of a kept record of this bisection; ConfigError when the name holds another one."""
        kept, problem = read_bisect_record(self.folder)
        if problem is not None:
            raise ConfigError(f"bisect: cannot resume {self.folder}: {problem}")
        if kept is None:
            return
        differs = next((key for key in SAME_INPUTS if kept.get(key) != self.inputs.get(key)), None)
        if differs is not None:
            raise ConfigError(f"bisect: {self.folder} holds another bisection (its {differs} differs); "
                              f"choose another sweep_name=")
        self.steps, self.started_at = list(kept["steps"]), str(kept.get("started_at") or self.started_at)
        decided = [s for s in self.steps if s["status"] != StepState.running]
        if decided:
            self.say(f"ddpbench-bisect: resuming {self.folder}: {len(decided)} commit(s) already decided")

    def save(self) -> None:
        """Write the record and the report (both atomically)."""
        record = build_bisect_record(self.inputs, self.steps, self.result, self.started_at, _now(), __version__)
        write_bisect_record(self.folder, record)
        write_text_atomic(self.folder / REPORT_FILE, bisect_markdown(record))

    def verdicts(self) -> Dict[int, StepStatus]:
        """Range index -> status of every decided commit."""
        index = {c.commit: i for i, c in enumerate(self.commits)}
        return {index[s["commit"]]: step_status(str(s["status"])) for s in self.steps
                if s["status"] != StepState.running and s["commit"] in index}

    def entry(self, position: int) -> Dict[str, Any]:
        """The step record of the commit at ``position`` (the kept one when resuming, else a new one)."""
        commit = self.commits[position]
        for step in self.steps:
            if step["commit"] == commit.commit:
                return step
        step = {"commit": commit.commit, "subject": commit.subject, "index": position,
                "sweep_dir": str(self.folder / f"{position + 1:03d}-{commit.short}"), "status": StepState.running,
                "started_at": _now()}
        self.steps.append(step)
        return step

    def run(self) -> int:
        """Measure commits until the search concludes; the exit status of its outcome."""
        self.load()
        regression = float(self.inputs["rule"]["regression_pct"])
        repo = self.inputs["repo"]
        while True:
            outcome = search.outcome(len(self.commits), self.verdicts())
            if outcome.status != BisectStatus.running:
                break
            assert outcome.next is not None
            commit = self.commits[outcome.next]
            left = len(outcome.candidates)
            self.say(f"ddpbench-bisect: measuring {commit.short} \"{commit.subject}\" ({left} candidate(s) left, "
                     f"about {max(0, left - 1).bit_length()} more step(s))")
            spec = f"{repo}@{commit.short}"
            entry = self.entry(outcome.next)
            self.save()
            step = measure(self.plan, commit, spec, arm_name(self.plan.mode, spec), entry, lambda _: self.save())
            left_out = f", {len(step['excluded'])} disturbed left out" if step.get("excluded") else ""
            self.say(f"ddpbench-bisect: {commit.short} \"{commit.subject}\": {figure(step)} per step vs good "
                     f"({step['n']} pair(s) counted of {step['pairs']}{left_out}): {verdict_words(step, regression)}")
        self.finish(outcome)
        return EXIT_CODES[outcome.status]

    def finish(self, outcome: search.Outcome) -> None:
        """Record the outcome, write the record and the report, say it in one line."""
        regression = float(self.inputs["rule"]["regression_pct"])
        candidates = [self.commits[i] for i in outcome.candidates]
        if outcome.status == BisectStatus.found:
            assert outcome.first_bad is not None
            bad = self.commits[outcome.first_bad]
            step = next(s for s in self.steps if s["commit"] == bad.commit)
            message = (f"first bad commit: {bad.commit} \"{bad.subject}\" ({figure(step)} per step vs the good "
                       f"commit {self.inputs['good']['commit'][:12]}, more than {regression:g} %)")
        elif outcome.status == BisectStatus.no_regression:
            message = (f"no regression: the bad commit {self.commits[-1].short} is not slower than the good one by "
                       f"more than {regression:g} % per step")
        else:
            message = ("inconclusive: the first bad commit is one of " +
                       ", ".join(f"{c.short} \"{c.subject}\"" for c in candidates) +
                       " (no verdict on the commits between; more pairs, precision.max_pairs, or a quieter machine)")
        self.result = {"status": outcome.status, "first_bad": self.commits[outcome.first_bad].commit
                       if outcome.first_bad is not None else None,
                       "candidates": [c.commit for c in candidates], "message": message}
        self.save()
        self.say(f"ddpbench-bisect: {message}")
        self.say(f"ddpbench-bisect: record {self.folder / 'bisect.json'}, report {self.folder / REPORT_FILE}")


def folder_of(name: str, base: Path) -> Path:
    """Where the bisection named ``name`` lives: ``outputs/bisect/<name>`` under ``base`` (where ddpbench ran)."""
    return base / "outputs" / "bisect" / name
