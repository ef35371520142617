"""SLURM backend: this driver is one SLURM task of a job with one task per node.

hydra-submitit-launcher (``hydra/launcher=ddpbench_slurm``) submits one job per trial with
``nodes = cluster.nnodes`` and ``tasks_per_node = 1``; the Hydra job function runs once per task, i.e.
once per node. Each task starts its own node's torchrun / ``traceml run`` agent:

- node rank = ``SLURM_NODEID``; master address = the first host of the allocation
  (``scontrol show hostnames $SLURM_JOB_NODELIST``, with a timeout);
- ports derived from the SLURM job id, so every node computes the same ones and two concurrent jobs
  (on shared nodes) differ; ``cluster.base_port`` pins them instead;
- run token = the SLURM job id (TraceML's ``--run-name`` is the same on every node);
- node 0 owns the trial (writes ``trial.json``); the others write ``nodes/node<r>.json``.

Node 0 also prepares the job dir (moves an earlier attempt's files aside, or decides to resume) *before*
any other node touches it: it writes ``.slurm/<job id>.ready`` when done and the other nodes wait for
that marker (bounded), so node 0 never moves a peer's fresh logs and a resumed trial launches nothing.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, List, Mapping, Optional

from omegaconf import DictConfig

from ddpbench.cluster import NodePlan
from ddpbench.errors import DdpbenchError
from ddpbench.trial.ports import derived_ports

if TYPE_CHECKING:
    from ddpbench.trial.job import JobInfo

#: seconds ``scontrol show hostnames`` may take
SCONTROL_TIMEOUT_S = 20.0
#: seconds a non-zero node waits for node 0 to have prepared the job dir
READY_WAIT_S = 120.0
READY_LAUNCH = "launch"
READY_RESUMED = "resumed"


def _env(env: Optional[Mapping[str, str]]) -> Mapping[str, str]:
    return os.environ if env is None else env


def in_allocation(env: Optional[Mapping[str, str]] = None) -> bool:
    """Whether this process runs inside a SLURM job step (SLURM_JOB_ID and SLURM_NODEID set)."""
    e = _env(env)
    return bool(e.get("SLURM_JOB_ID")) and bool(e.get("SLURM_NODEID"))


def allocation_hosts(nodelist: str, timeout: float = SCONTROL_TIMEOUT_S) -> List[str]:
    """The hosts of a SLURM node list (``n[1-2]`` -> ``["n1", "n2"]``), via ``scontrol`` (bounded)."""
    try:
        proc = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise DdpbenchError("cluster.kind=slurm: scontrol not found on PATH inside the SLURM job") from exc
    except subprocess.TimeoutExpired as exc:
        raise DdpbenchError(f"cluster.kind=slurm: 'scontrol show hostnames {nodelist}' took longer than "
                            f"{timeout:g} s") from exc
    hosts = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not hosts:
        detail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise DdpbenchError(f"cluster.kind=slurm: 'scontrol show hostnames {nodelist}' failed: {detail}")
    return hosts


def _ready_marker(job: "JobInfo", job_id: str) -> Path:
    return job.job_dir / ".slurm" / f"{job_id}.ready"


def _prepare_as_owner(cfg: DictConfig, job: "JobInfo", job_id: str) -> None:
    """Node 0: resume or move the previous attempt aside, then tell the other nodes (marker file)."""
    from ddpbench.config import to_plain
    from ddpbench.io import write_json_atomic
    from ddpbench.trial import record
    from ddpbench.trial.attempts import previous_ok, set_aside_previous_attempt

    decision = READY_LAUNCH
    if cfg.trial.resume and previous_ok(job.job_dir, record.config_hash(to_plain(cfg))) is not None:
        decision = READY_RESUMED
    else:
        set_aside_previous_attempt(job.job_dir)
    write_json_atomic(_ready_marker(job, job_id), {"decision": decision, "time": time.time()})


def _await_owner(job: "JobInfo", job_id: str, timeout: float = READY_WAIT_S) -> str:
    """A non-zero node: wait (bounded) for node 0's marker; its decision."""
    from ddpbench.io import read_json

    marker = _ready_marker(job, job_id)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return str(read_json(marker).get("decision", READY_LAUNCH))
        except (OSError, ValueError, AttributeError):
            pass
        if time.monotonic() >= deadline:
            raise DdpbenchError(f"cluster.kind=slurm: node 0 of SLURM job {job_id} did not prepare "
                                f"{job.job_dir} within {timeout:g} s (no {marker.name})")
        time.sleep(0.2)


def plan_slurm(cfg: DictConfig, job: "JobInfo", env: Optional[Mapping[str, str]] = None) -> NodePlan:
    """This SLURM task's node plan (one task per node; node 0 owns the trial)."""
    e = _env(env)
    if not in_allocation(e):
        raise DdpbenchError(
            "cluster.kind=slurm runs inside a SLURM job (SLURM_JOB_ID/SLURM_NODEID are not set): run a sweep "
            "with -m so the ddpbench_slurm launcher submits it, or use a local cluster"
        )
    job_id = str(e["SLURM_JOB_ID"])
    node_rank = int(e["SLURM_NODEID"])
    nnodes = int(cfg.cluster.nnodes)
    allocated = int(e.get("SLURM_JOB_NUM_NODES") or e.get("SLURM_NNODES") or 0)
    if allocated and allocated != nnodes:
        raise DdpbenchError(f"cluster.nnodes={nnodes} but SLURM job {job_id} has {allocated} node(s): "
                            "submit with hydra.launcher.nodes=cluster.nnodes")
    tasks = e.get("SLURM_NTASKS")
    if tasks and int(tasks) != allocated and allocated:
        raise DdpbenchError(f"SLURM job {job_id} runs {tasks} tasks on {allocated} node(s); ddpbench needs "
                            "exactly one task per node (hydra.launcher.tasks_per_node=1)")
    nodelist = e.get("SLURM_JOB_NODELIST") or e.get("SLURM_NODELIST") or ""
    master_addr = allocation_hosts(nodelist)[0] if nodelist else "127.0.0.1"
    master_port, aggregator_port = derived_ports(job_id, 2, int(cfg.cluster.base_port))
    owner = node_rank == 0
    node_ranks = [node_rank]
    if owner:
        _prepare_as_owner(cfg, job, job_id)
    elif _await_owner(job, job_id) == READY_RESUMED:
        node_ranks = []  # node 0 resumes an ok trial: nothing to launch here
    return NodePlan(
        node_ranks=node_ranks,
        master_addr=master_addr,
        master_port=master_port,
        aggregator_port=aggregator_port,
        owner=owner,
        retry_on_port_clash=False,
        run_token=job_id,
        peer_record_wait_s=float(cfg.cluster.slurm.peer_record_wait_s),
    )
