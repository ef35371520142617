"""Run one trial: launch the node agents this driver owns, time them, collect rank records, write trial.json.

This is the body of one Hydra job. It never raises for a trial that went wrong: a crash, hang or
timeout becomes a ``failed``/``timeout`` record, so a sweep goes on. It raises
:class:`~ddpbench.errors.DdpbenchError` only for bad input, before anything is launched.
"""

from __future__ import annotations

import datetime as dt
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple


from ddpbench import __version__
from ddpbench.cluster import NodePlan, backend_for, plan_nodes
from ddpbench.cluster import validate as validate_cluster
from ddpbench.config import DdpbenchConfig, parse_repeat, to_plain, validate
from ddpbench.formats import trial_record as record
from ddpbench.formats.condition import is_condition_override
from ddpbench.formats.rank_combine import rank_consistency_error
from ddpbench.formats.rank_record import RANK_RECORD_GLOB, read_rank_record
from ddpbench.io import read_json, write_json_atomic
from ddpbench.trial import command as commands
from ddpbench.trial import artifacts, environment, ray_train, wrapped
from ddpbench.trial import load as trial_load
from ddpbench.trial.attempts import Attempt, attempt_for, previous_ok
from ddpbench.trial.frameworks import records_enabled, records_required
from ddpbench.trial.job import JobInfo
from ddpbench.trial.launch import launch_with_retry
from ddpbench.trial.pinning import trial_pinning
from ddpbench.trial.process import AgentResult, WaitOutcome, tail
from ddpbench.trial.script_metrics import apply_metrics
from ddpbench.trial.script_workload import check_script_workload, is_user_script
from ddpbench.trial.summary import NodeDone, TrialOutcome, TrialRecord
from ddpbench.trial.tool import check_tool
from ddpbench.versions.arm import arm_section, at_version


def trial_timeout_s(cfg: DdpbenchConfig) -> float:
    """The watchdog limit: ``trial.timeout_s`` or expected duration * factor + margin."""
    if cfg.trial.timeout_s is not None:
        return cfg.trial.timeout_s
    if cfg.stop.kind == "steps":
        expected = ((cfg.stop.steps or 0) + cfg.stop.warmup_steps) * cfg.trial.expected_step_s
    else:
        expected = (cfg.stop.duration_sec or 0.0) + cfg.stop.warmup_steps * cfg.trial.expected_step_s
    injected = cfg.inject.startup_s + cfg.inject.teardown_s if cfg.mode.workload_args else 0.0
    return expected * cfg.trial.timeout_factor + cfg.trial.timeout_margin_s + injected


def check_command(cfg: DdpbenchConfig) -> None:
    """Render the mode's templates once with stand-in values: a bad placeholder fails before any launch."""
    context = commands.make_context(
        cfg, node_rank=0, master_addr="127.0.0.1", master_port=1, aggregator_port=2, run_name="check",
        job_dir=Path("job"),
    )
    commands.node_command(cfg, context)
    commands.node_environment(cfg, context, base={})
    commands.summary_path(cfg, context)
    artifacts.artifact_path(cfg, context)


def check_trial_config(cfg: DdpbenchConfig) -> None:
    """Every check that can fail before a trial launches: values, the cluster backend, the tool, the command templates."""
    validate(cfg)
    check_script_workload(cfg)
    ray_train.check(cfg)
    validate_cluster(cfg)
    check_tool(cfg)
    check_command(cfg)
    trial_pinning(cfg)


def condition_of(job: JobInfo) -> Dict[str, str]:
    """Every chosen or swept key except mode and repeat: what a pair shares."""
    condition = {key: job.choices.get(key, "") for key in ("cluster", "model", "stop")}
    for override in job.overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if not is_condition_override(override) or key in condition:
            continue
        condition[key] = value
    return condition


def read_rank_records(metrics_dir: Path) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The valid rank records in ``metrics_dir`` (any known version), and one line per file that is not valid."""
    records, problems = [], []
    for path in sorted(metrics_dir.glob(RANK_RECORD_GLOB)):
        data, issues = read_rank_record(path)
        if data is None:
            problems.append(f"{path.name}: {issues[0]}" + (f" (+{len(issues) - 1} more)" if len(issues) > 1 else ""))
        else:
            records.append(data)
    return records, problems


def _node_entry(result: AgentResult, hostname: str) -> Dict[str, Any]:
    return record.node_entry(
        result.node_rank, hostname, wall_s=result.wall_s, exit_code=result.exit_code,
        spawn_epoch=result.spawn_epoch, exit_epoch=result.exit_epoch, killed_by=result.killed_by,
        stdout=result.stdout_path, stderr=result.stderr_path,
    )


def _await_peer_nodes(attempt_dir: Path, expected: Sequence[int], deadline: float) -> Dict[int, Dict[str, Any]]:
    found: Dict[int, Dict[str, Any]] = {}
    while True:
        for node_rank in expected:
            if node_rank in found:
                continue
            try:
                found[node_rank] = read_json(record.node_record_path(attempt_dir, node_rank))
            except (OSError, ValueError):
                pass
        if len(found) == len(expected) or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


#: a Python exception line (optionally behind torchrun's ``[rankN]: `` prefix), not torchrun's own summary
_EXCEPTION_LINE = re.compile(r"^(\[rank\d+\]: )?(?!\S*ChildFailedError)[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b:? ?.*$")


def _first_error_line(text: str) -> str:
    exceptions = [line.strip() for line in text.splitlines() if _EXCEPTION_LINE.match(line.strip())]
    if exceptions:
        return exceptions[-1][:300]
    for line in reversed(text.splitlines()):
        stripped = line.strip()
        if stripped and ("Error" in stripped or "error" in stripped or "Exception" in stripped):
            return stripped[:300]
    return ""


@dataclass(frozen=True)
class Launched:
    """What launching this driver's agents gave: their results, the last launch context and what else ran."""

    outcome: WaitOutcome
    # the last agent's placeholders (None when nothing could be launched)
    context: Optional[commands.LaunchContext]
    # ISO time the launch started (UTC)
    started_at: str
    # the trial record's ``load`` section
    load: Dict[str, Any]
    # this driver's node entries, by node rank
    nodes: Dict[int, Dict[str, Any]]


def run_trial(cfg: DdpbenchConfig, job: JobInfo) -> TrialOutcome:
    """Run the trial ``cfg`` describes in ``job.job_dir``: node 0's trial record (also on disk), or a peer's NodeDone.

    Steps: check the config, plan the nodes, resume an ok trial, else claim an attempt, launch and
    wait (one retry on a port clash), then report this node to node 0 (a peer) or gather every node
    and rank, classify and write trial.json (node 0).
    """
    check_trial_config(cfg)
    cfg = at_version(cfg)
    plain = to_plain(cfg)
    job.job_dir.mkdir(parents=True, exist_ok=True)
    timeout_s = trial_timeout_s(cfg)
    plan = plan_nodes(cfg, job, timeout_s)
    resumed = resume(cfg, job, plan, plain)
    if resumed is not None:
        return resumed
    attempt = attempt_for(job.job_dir, plan)  # this launch's own folder: attempts/<n>/
    if plan.skip_reason is not None:
        return skip_node(cfg, job, plan, attempt.dir)
    launched = launch_agents(cfg, job, plan, timeout_s, attempt.dir)
    if not plan.owner:
        return report_to_owner(cfg, plan, attempt.dir, launched)
    trial = owner_record(cfg, job, plan, timeout_s, attempt, plain, launched)
    write_json_atomic(job.job_dir / record.TRIAL_FILE, trial)
    return TrialRecord(trial)


def resume(cfg: DdpbenchConfig, job: JobInfo, plan: NodePlan, plain: Mapping[str, Any]) -> Optional[TrialOutcome]:
    """The outcome of a trial already done (node 0 keeps its ok record and tells the others), else None."""
    if backend_for(cfg).owner_resumed(cfg, plan, job):
        return node_done(cfg, plan, node_ok=True)  # node 0 resumes an ok trial: nothing to launch here
    may_resume = plan.owner if plan.resume is None else plan.resume
    previous = previous_ok(job.job_dir, record.config_hash(plain)) if may_resume and cfg.trial.resume else None
    if previous is None:
        return None
    backend_for(cfg).tell_peers(cfg, plan, job, resumed=True)
    return TrialRecord(previous, resumed=True)


def launch_agents(cfg: DdpbenchConfig, job: JobInfo, plan: NodePlan, timeout_s: float, attempt_dir: Path) -> Launched:
    """Tell the other nodes, start this driver's agents (pinned) and wait for them; their node entries."""
    backend_for(cfg).tell_peers(cfg, plan, job, resumed=False)
    started_at = _now()
    pins, load_start = trial_pinning(cfg), trial_load.sample()
    with pins.applied():
        outcome, context = launch_with_retry(cfg, job, plan, timeout_s, attempt_dir)
    load = trial_load.load_section(load_start, trial_load.sample(), n_cpus=len(pins.available),
                                   own_cpus=pins.own_cpus, cpu_affinity=pins.record())
    nodes = {r.node_rank: _node_entry(r, socket.gethostname()) for r in outcome.results}
    return Launched(outcome, context, started_at, load, nodes)


def owner_record(
    cfg: DdpbenchConfig, job: JobInfo, plan: NodePlan, timeout_s: float, attempt: Attempt, plain: Dict[str, Any],
    launched: Launched,
) -> Dict[str, Any]:
    """Node 0's trial record: every node and rank gathered, the trial classified, the tool's output inspected."""
    ranks, rank_problems = read_rank_records(attempt.dir / "metrics")
    nodes = {**launched.nodes, **_peer_nodes(cfg, attempt.dir, plan, launched.nodes, ranks)}
    status, error = classify(launched.outcome.reason, timeout_s, nodes, ranks, cfg, rank_problems)
    metrics, status, error = apply_metrics(cfg, nodes, status, error)
    context = launched.context
    imported = next((r["tool"].get("version") for r in ranks if isinstance(r.get("tool"), dict)), None)
    tool = artifacts.inspect(cfg, context, [n.get("stderr") for n in nodes.values()], version=imported)
    status, error = artifacts.verdict(status, error, tool)
    wall_s, spawn_epoch = slowest_node_wall(nodes)
    summary_file = commands.summary_path(cfg, context) if context is not None else None
    meta = trial_meta(cfg, job, started_at=launched.started_at, ended_at=_now(), timeout_s=timeout_s)
    return record.build_trial_record(
        meta={**meta, "arm": arm_section(cfg, ranks)},
        config=plain,
        status=status,
        exit_code=None if status == "timeout" else first_failing_exit_code(nodes),
        error=error,
        wall_s=wall_s,
        spawn_epoch=spawn_epoch,
        ranks=ranks,
        nodes=[nodes[k] for k in sorted(nodes)],
        traceml=artifacts.summary_section(_read_optional_json(summary_file), str(summary_file) if summary_file else None),
        environment=environment.describe(ranks, [str(n.get("hostname")) for n in nodes.values()]),
        logs=_logs_section(nodes, status),
        metrics=metrics,
        tool=tool.to_record() if tool is not None else None,
        attempt=attempt.section(),
        load=launched.load,
    )


def report_to_owner(cfg: DdpbenchConfig, plan: NodePlan, attempt_dir: Path, launched: Launched) -> NodeDone:
    """A peer node's end of a trial: its node records for node 0 (in the attempt's folder), and its NodeDone."""
    for entry in launched.nodes.values():
        write_json_atomic(record.node_record_path(attempt_dir, entry["node_rank"]), entry)
    results = launched.outcome.results
    return node_done(cfg, plan, node_ok=all(r.exit_code == 0 for r in results),
                     wall_s=max((r.wall_s for r in results), default=None))


def node_done(cfg: DdpbenchConfig, plan: NodePlan, node_ok: bool, wall_s: Optional[float] = None,
              error: Optional[str] = None) -> NodeDone:
    """What a peer node's job tells its own sweeper (node 0's trial.json holds the trial)."""
    return NodeDone(list(plan.node_ranks), cfg.mode.name, parse_repeat(cfg.repeat), node_ok, wall_s, error)


def _peer_nodes(
    cfg: DdpbenchConfig, attempt_dir: Path, plan: NodePlan, own: Mapping[int, Any], ranks: Sequence[Mapping[str, Any]]
) -> Dict[int, Dict[str, Any]]:
    """The other nodes' entries: from their node records in this attempt's shared folder, or from their ranks."""
    peers = [r for r in range(cfg.cluster.nnodes) if r not in own]
    if not peers:
        return {}
    if not plan.peer_records:
        return record.nodes_from_ranks(ranks, peers, cfg.cluster.nproc_per_node)
    found = _await_peer_nodes(attempt_dir, peers, time.monotonic() + plan.peer_record_wait_s)
    for node_rank, entry in found.items():  # an srun step's node (slurm one_allocation) recorded its wrapper's code
        entry["exit_code"] = wrapped.exit_code(entry.get("exit_code"), attempt_dir / "logs", node_rank)
    return found


def skip_node(cfg: DdpbenchConfig, job: JobInfo, plan: NodePlan, attempt_dir: Path) -> NodeDone:
    """A non-owner that must not launch this trial (its peers left it): record why, report failure."""
    now = time.time()
    for node_rank in plan.node_ranks:
        entry = record.node_entry(node_rank, socket.gethostname(), wall_s=0.0, exit_code=None, spawn_epoch=now,
                                  exit_epoch=now, error=plan.skip_reason)
        write_json_atomic(record.node_record_path(attempt_dir, node_rank), entry)
    print(f"ddpbench: node {plan.node_ranks} skips job {job.job_num}: {plan.skip_reason}", flush=True)
    return node_done(cfg, plan, node_ok=False, error=plan.skip_reason)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def trial_meta(cfg: DdpbenchConfig, job: JobInfo, *, started_at: str, ended_at: str, timeout_s: float) -> Dict[str, Any]:
    """The identity fields of a trial record: where it sits in its sweep and what it paired on."""
    condition = condition_of(job)
    return {
        "ddpbench_version": __version__,
        "sweep_dir": str(job.sweep_dir.resolve()),
        "job_dir": str(job.job_dir.resolve()),
        "job_num": job.job_num,
        "mode": cfg.mode.name,
        "repeat": parse_repeat(cfg.repeat),
        "pair_position": cfg.pair_position,
        "condition": condition,
        "condition_id": ",".join(f"{k}={v}" for k, v in condition.items()),
        "overrides": list(job.overrides),
        "started_at": started_at,
        "ended_at": ended_at,
        "timeout_s": timeout_s,
    }


def classify(
    wait_reason: str,
    timeout_s: float,
    nodes: Mapping[int, Mapping[str, Any]],
    ranks: Sequence[Mapping[str, Any]],
    cfg: DdpbenchConfig,
    rank_problems: Sequence[str] = (),
) -> Tuple[str, Optional[str]]:
    """The trial's status (ok/failed/timeout) and, unless ok, one line saying why.

    ``rank_problems``: one line per rank record that failed validation (those records are not in ``ranks``).
    """
    if wait_reason == "timeout":
        return "timeout", f"trial ran past its timeout of {timeout_s:.0f} s and was killed"
    missing = [r for r in range(cfg.cluster.nnodes) if r not in nodes]
    bad = next((n for n in nodes.values() if n.get("exit_code") != 0), None)
    if missing and (bad is None or bad.get("exit_code") is None):  # a node that failed outright says more
        return "failed", f"node(s) {missing} left no node record"
    if bad is not None:
        detail = bad.get("error") or _first_error_line(tail(bad.get("stderr") or "", 60))
        return "failed", f"node {bad['node_rank']} exited with {bad.get('exit_code')}" + (f": {detail}" if detail else "")
    if rank_problems:
        return "failed", f"invalid rank record {rank_problems[0]}"
    if is_user_script(cfg) and not (records_enabled(cfg) and (ranks or records_required(cfg))):
        return "ok", None  # no recorder, or a framework it could not attach to (said on stderr): wall-time figures
    error = rank_consistency_error(ranks, cfg.cluster.nnodes * cfg.cluster.nproc_per_node)
    return ("failed", error) if error else ("ok", None)


def first_failing_exit_code(nodes: Mapping[int, Mapping[str, Any]]) -> Optional[int]:
    """The first non-zero node exit code, 0 when every node exited 0, None when one was killed."""
    codes = [nodes[k].get("exit_code") for k in sorted(nodes)]
    failing = [c for c in codes if c not in (0, None)]
    if failing:
        return int(failing[0])
    return 0 if all(c == 0 for c in codes) else None


def slowest_node_wall(nodes: Mapping[int, Mapping[str, Any]]) -> Tuple[float, float]:
    """The trial's wall (the slowest node's own spawn-to-exit wall, s) and that node's spawn epoch.

    Nodes seen only through their ranks (no shared dir) have no wall and are left out.
    """
    timed = [n for n in nodes.values() if n.get("wall_s") is not None]
    slowest = max(timed, key=lambda n: float(n["wall_s"]))
    return float(slowest["wall_s"]), float(slowest["spawn_epoch"])


def _read_optional_json(path: Optional[Path]) -> Optional[Dict[str, Any]]:
    if path is None or not path.exists():
        return None
    try:
        return read_json(path)
    except (OSError, ValueError):
        return None


def _logs_section(nodes: Mapping[int, Mapping[str, Any]], status: str) -> Dict[str, Any]:
    ordered = [nodes[k] for k in sorted(nodes)]
    stderr_paths = [n.get("stderr") for n in ordered]
    return {
        "stdout": [n.get("stdout") for n in ordered],
        "stderr": stderr_paths,
        "tail": None if status == "ok" else "\n".join(tail(p, 20) for p in stderr_paths if p),
    }
