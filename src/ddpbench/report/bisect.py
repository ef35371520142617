"""A bisection's ``report.md``, rendered from its record (``bisect.json``) alone: what was bisected, every commit
measured (in order, its per-step Δ against the good commit with its interval), the outcome."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ddpbench.choices import Verdict
from ddpbench.formats.bisect_record import BisectStatus, StepState, StepStatus, step_status

_STATUS_WORDS: Dict[StepStatus, str] = {Verdict.over: "bad (slower)", Verdict.within: "good",
                                        Verdict.inconclusive: "no verdict (skipped)",
                                        StepState.failed: "a trial failed (skipped)", StepState.running: "measuring"}


def _cell(text: Any) -> str:
    """Text safe inside a markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def figure(step: Mapping[str, Any]) -> str:
    """A measured commit's per-step Δ against the good commit with its interval: ``+12.3 % [+10.1, +14.5]``."""
    if step.get("mean") is None:
        return "no figure"
    if step.get("ci_low") is None:
        return f"{step['mean']:+.3g} % (no interval yet)"
    return f"{step['mean']:+.3g} % [{step['ci_low']:+.3g}, {step['ci_high']:+.3g}]"


def bisect_markdown(record: Mapping[str, Any]) -> str:
    """The report of one bisection record (any status: a running one shows what is decided so far)."""
    rule, result = record["rule"], record["result"]
    good, bad = record["good"], record["bad"]
    lines = [f"# ddpbench bisect: {record['name']}", "",
             f"**{_cell(result.get('message') or result['status'])}**", "",
             f"- mode `{record['mode']}` ({record.get('package') or 'its tool'}) from `{record['repo']}`",
             f"- good `{good['ref']}` = {good['commit'][:12]} \"{_cell(good['subject'])}\"; bad `{bad['ref']}` = "
             f"{bad['commit'][:12]} \"{_cell(bad['subject'])}\"; {len(record['commits'])} commit(s) after the good "
             "one (git rev-list --first-parent good..bad)",
             f"- a commit is bad when its per-step cost exceeds the good commit's by more than "
             f"{rule['regression_pct']:g} % ({rule['metric']}: "
             + ("each trial's within-trial cost, tool on vs off, differenced between the two commits" if
                rule.get("switched") else "paired trials of the two commits, alternating order")
             + f"), with {100 * rule['confidence']:g} % confidence over a commit's looks: pairs are added from "
             f"{rule['min_pairs']} up to {rule['max_pairs']} until the interval lies wholly above or below "
             f"({rule['spending']} alpha spending, docs/sequential.md)",
             f"- overrides: `{' '.join(record.get('overrides') or []) or '(none)'}`", "",
             "## Commits measured", "",
             "Per-step Δ against the good commit, % of its step, with the interval of the last look.", "",
             "| # | commit | subject | pairs | per-step Δ [interval] | verdict | sweep |",
             "|---|---|---|---|---|---|---|"]
    for number, step in enumerate(record["steps"], start=1):
        verdict = _STATUS_WORDS[step_status(str(step["status"]))]
        if step.get("error"):
            verdict += f": {step['error']}"
        lines.append(f"| {number} | {step['commit'][:12]} | {_cell(step.get('subject', ''))} | {step.get('n', 0)} "
                     f"| {figure(step)} | {_cell(verdict)} | {_cell(step['sweep_dir'])} |")
    left = result.get("candidates") or []
    if result["status"] == BisectStatus.inconclusive and left:
        lines += ["", "Candidates left (the first bad commit is one of them): "
                  + ", ".join(str(c)[:12] for c in left)]
    lines += ["", f"Started {record.get('started_at')}, updated {record.get('updated_at')} "
              f"(ddpbench {record.get('ddpbench_version')})."]
    return "\n".join(lines) + "\n"
