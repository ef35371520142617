"""Did the tool leave usable output? One check per artifact kind a mode declares (``mode.artifacts``; docs/tools.md):
a declared artifact missing, empty or unreadable fails the trial in one line; a summary of a format this reader does
not know never does (``tool.format`` ``unknown``, ``tool.problem`` names the tool's version)."""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ddpbench.choices import ArtifactKind, StopKind, TrialStatus
from ddpbench.config import DdpbenchConfig
from ddpbench.formats.trial_record import traceml_section
from ddpbench.trial.command import LaunchContext, fill_placeholders
from ddpbench.trial.process import tail

#: kinds whose path is a folder the tool writes into (the others name one file)
FOLDER_KINDS = ("torch_trace", "wandb_offline")

#: what py-spy prints when the kernel refuses it access to a process (ptrace / process_vm_readv)
PTRACE_REFUSED = re.compile(
    r"Permission Denied: Try running again|(?:Operation not permitted|Permission denied) \(os error (?:1|13)\)"
)

#: the TraceML summary schemas this reader knows (major version 1: 1.x as written by traceml-ai 0.3 to 0.5)
KNOWN_TRACEML_SCHEMAS = ("1",)

Check = Callable[[Path, DdpbenchConfig], Tuple[List[Path], Optional[str]]]


@dataclass
class ToolOutput:
    """What a trial's tool left: the ``tool`` section of its record."""

    # the tool (KINDS)
    name: str
    # paths of the output found (files, or a W&B run folder)
    artifacts: List[str]
    # their size on disk, bytes (folders: every file below)
    bytes: int
    # the output holds what the tool is for
    usable: bool
    # one line saying why it is not usable (None when usable)
    problem: Optional[str]
    # the problem is also why the trial failed (e.g. ptrace refused): it becomes the trial's error
    explains_failure: bool = field(default=False, repr=False)
    # known | unknown: whether this reader knows the format of the tool's summary
    format: str = "known"

    def to_record(self) -> Dict[str, Any]:
        """The record's ``tool`` section."""
        return {key: value for key, value in asdict(self).items() if key != "explains_failure"}


#: how a check says the output exists but its format is not one this reader knows (never a failure)
UNKNOWN_FORMAT = "tool summary: unknown format"


def summary_section(summary: Optional[Dict[str, Any]], path: Optional[str]) -> Optional[Dict[str, Any]]:
    """trial.json's ``traceml`` figures from the tool's summary; all null when its format is not known."""
    try:
        return traceml_section(summary, path)
    except (AttributeError, TypeError, ValueError):
        return traceml_section(None, path)


def artifact_path(cfg: DdpbenchConfig, context: LaunchContext) -> Optional[Path]:
    """Where the mode's declared artifact lies (job dir + ``mode.artifacts.path``), or None when none is declared."""
    declared = cfg.mode.artifacts
    if declared is None:
        return None
    return Path(context.job_dir) / fill_placeholders(str(declared.path), context)


def prepare(cfg: DdpbenchConfig, context: LaunchContext) -> None:
    """Create the folder the artifact is written into (py-spy does not create its output's folder)."""
    path, declared = artifact_path(cfg, context), cfg.mode.artifacts
    if path is not None and declared is not None and declared.kind != "traceml_summary":  # traceml run makes its own run dir
        (path if declared.kind in FOLDER_KINDS else path.parent).mkdir(parents=True, exist_ok=True)


def inspect(cfg: DdpbenchConfig, context: Optional[LaunchContext], stderr_paths: Sequence[Optional[str]],
            version: Optional[str] = None) -> Optional[ToolOutput]:
    """Check the mode's declared artifact after the trial (None when it declares none); ``stderr_paths``: the agents'
    logs (searched for a ptrace refusal), ``version``: the tool's as the ranks imported it."""
    if context is None or cfg.mode.artifacts is None:
        return None
    kind = cfg.mode.artifacts.kind
    tool_name, check = KINDS[kind]
    path = artifact_path(cfg, context)
    assert path is not None
    found, problem = check(path, cfg)
    if problem is not None:  # name paths inside the job dir relative to it: the error stays one short line
        problem = problem.replace(str(Path(context.job_dir)) + os.sep, "")
    unknown = problem is not None and problem.startswith(UNKNOWN_FORMAT)
    if unknown:
        problem = f"{problem} ({cfg.mode.requires_package or tool_name} {version or 'version unknown'})"
    output = ToolOutput(name=tool_name, artifacts=[str(p) for p in found], bytes=sum(_size(p) for p in found),
                        usable=problem is None or unknown, problem=problem, format="unknown" if unknown else "known")
    if problem is not None and kind == "speedscope":
        refusal = next((line for p in stderr_paths if p for line in tail(p, 200).splitlines()
                        if PTRACE_REFUSED.search(line)), None)
        if refusal is not None:
            output.problem = ptrace_problem(refusal)
            output.explains_failure = True
    return output


def ptrace_problem(line: str) -> str:
    """The one-line error for py-spy refused by the kernel, quoting py-spy's ``line``."""
    return (f"py-spy was refused access to the ranks by the kernel (ptrace: {line.strip()[:120]}); allow it with "
            "`sysctl kernel.yama.ptrace_scope=0`, or run with CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE)")


def verdict(status: TrialStatus, error: Optional[str], tool: Optional[ToolOutput]) -> Tuple[TrialStatus, Optional[str]]:
    """The trial's status and error once its tool output is known: an ok trial without usable output fails."""
    if tool is None or tool.usable:
        return status, error
    if status == TrialStatus.ok:
        return TrialStatus.failed, f"{tool.name} output not usable: {tool.problem}"
    return status, tool.problem if tool.explains_failure else error


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size if path.exists() else 0


def _load_json(path: Path) -> Any:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
        return json.load(handle)


def check_traceml_summary(path: Path, cfg: DdpbenchConfig) -> Tuple[List[Path], Optional[str]]:
    """TraceML's final_summary.json exists and analysed a step (a user's script marking none needs only the file)."""
    if not path.is_file():
        return [], f"no TraceML summary at {path}"
    try:
        summary = _load_json(path)
    except (OSError, ValueError) as exc:
        return [path], f"TraceML summary {path} is unreadable ({type(exc).__name__}: {exc})"
    schema = summary.get("schema_version") if isinstance(summary, dict) else None
    try:
        if schema is not None and str(schema).split(".")[0] not in KNOWN_TRACEML_SCHEMAS:
            raise KeyError("schema_version")
        steps = summary["step_time"]["global"]["window"]["steps_analyzed"]
    except (KeyError, TypeError, AttributeError):
        return [path], f"{UNKNOWN_FORMAT} (schema_version {schema})"
    if not isinstance(steps, (int, float)) or (steps <= 0 and not cfg.decided.script.is_user_script):
        return [path], f"TraceML analysed {steps} steps ({path})"
    return [path], None


def check_torch_trace(path: Path, cfg: DdpbenchConfig) -> Tuple[List[Path], Optional[str]]:
    """At least one torch.profiler Chrome trace in the folder, and every one holds events."""
    traces = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    if not traces:
        prof = cfg.tool.torch_profiler
        cycle = prof.wait + prof.warmup + prof.active
        steps = cfg.stop.warmup_steps + ((cfg.stop.steps or 0) if cfg.stop.kind == StopKind.steps else 0)
        hint = (f": its schedule needs {cycle} steps (wait+warmup+active), the run has {steps} (warmup+timed)"
                if cfg.stop.kind == StopKind.steps and cycle > steps else "")
        return [], f"torch.profiler wrote no trace in {path}{hint}"
    for trace in traces:
        try:
            events = _load_json(trace).get("traceEvents")
        except (OSError, ValueError, AttributeError, EOFError) as exc:
            return traces, f"trace {trace} is unreadable ({type(exc).__name__})"
        if not isinstance(events, list) or not events:
            return traces, f"trace {trace} holds no events"
    return traces, None


def check_speedscope(path: Path, cfg: DdpbenchConfig) -> Tuple[List[Path], Optional[str]]:
    """py-spy's speedscope file exists and holds at least one sample."""
    if not path.is_file():
        return [], f"py-spy wrote no profile at {path}"
    try:
        profiles = _load_json(path).get("profiles")
    except (OSError, ValueError, AttributeError) as exc:
        return [path], f"py-spy profile {path} is unreadable ({type(exc).__name__})"
    samples = sum(len(p.get("samples") or []) for p in profiles or [] if isinstance(p, dict))
    if samples == 0:
        return [path], f"py-spy profile {path} holds no samples"
    return [path], None


def check_wandb_offline(path: Path, cfg: DdpbenchConfig) -> Tuple[List[Path], Optional[str]]:
    """An offline W&B run whose record file holds logged steps; no online run beside it."""
    runs_dir = path / "wandb"
    online = sorted(runs_dir.glob("run-*"))
    if online:
        return online, f"W&B run {online[0].name} is not offline (WANDB_MODE must be offline)"
    runs = sorted(p for p in runs_dir.glob("offline-run-*") if p.is_dir())
    if not runs:
        return [], f"no W&B offline run in {runs_dir}"
    for run in runs:
        records = sorted(run.glob("run-*.wandb"))
        data = records[0].read_bytes() if records else b""
        if not data.startswith(b":W&B"):
            return runs, f"W&B run {run} has no record file (run-*.wandb)"
        if b"step_time_ms" not in data:
            return runs, f"W&B run {run} holds no logged steps"
    return runs, None


#: each artifact kind: the tool it belongs to (the ``tool.name`` recorded) and its check
KINDS: Dict[str, Tuple[str, Check]] = {
    "traceml_summary": ("traceml", check_traceml_summary),
    "torch_trace": ("torch.profiler", check_torch_trace),
    "speedscope": ("py-spy", check_speedscope),
    "wandb_offline": ("wandb", check_wandb_offline),
}
assert set(KINDS) == set(ArtifactKind), "every artifact kind needs a tool name and a check"
