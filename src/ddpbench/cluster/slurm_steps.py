"""SLURM ``one_allocation``: the whole sweep runs in the batch script of one job; each trial is an srun step.

With ``cluster.slurm.one_allocation=true`` the submitting driver sends ONE job (``nodes = cluster.nnodes``,
one task per node; :meth:`BoundedSlurmLauncher.run_one_allocation`) whose batch script runs the same sweep
(``python -m ddpbench -m ... hydra/launcher=basic hydra.sweep.dir=<same>``) on the allocation's first
node. That in-allocation driver plans each trial here:

- one agent (``node_ranks=[0]``, owner) whose argv is
  ``srun --nodes=N --ntasks-per-node=1 --kill-on-bad-exit=1 python -m ddpbench.cluster.slurm_steps ... -- CMD``;
  CMD is the node command rendered with node rank :data:`~ddpbench.cluster.base.NODE_RANK_TOKEN`, which
  :func:`main` replaces on each node with ``SLURM_NODEID`` (no shell quoting involved);
- master address = the first host of the allocation; ports derived from the job id and the trial number;
- node 0's output goes to the agent's own logs (through srun); every other node writes its own
  ``logs/node<r>.{stdout,stderr}.log`` and ``nodes/node<r>.json`` (hostname, wall, exit code) in the
  shared job dir, which node 0 reads as with one job per trial. Node 0's wall is the srun step's (it
  includes srun's step launch, the same for every mode).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import List, Mapping, Optional

from ddpbench.cluster.base import NODE_RANK_TOKEN, NodePlan, TrialSlot
from ddpbench.cluster.ports import derived_ports
from ddpbench.cluster.slurm_env import SlurmTask, allocation_hosts
from ddpbench.config import DdpbenchConfig
from ddpbench.errors import DdpbenchError
from ddpbench.formats.trial_record import node_entry, node_log_path, node_record_path
from ddpbench.io import write_json_atomic


def srun_argv(nnodes: int, cpus_per_task: Optional[int], gpus_per_node: Optional[int], argv: List[str],
              job_dir: Path) -> List[str]:
    """``argv`` (with the node-rank token) as one srun step over ``nnodes`` nodes, one task each."""
    step = ["srun", f"--nodes={nnodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    if cpus_per_task:
        step.append(f"--cpus-per-task={cpus_per_task}")  # 22.05's srun does not inherit it from sbatch
    if gpus_per_node:
        step.append(f"--gpus-per-node={gpus_per_node}")
    return [*step, sys.executable, "-m", "ddpbench.cluster.slurm_steps", "--job-dir", str(job_dir), "--", *argv]


def plan_slurm_steps(cfg: DdpbenchConfig, job: TrialSlot, env: Optional[Mapping[str, str]] = None) -> NodePlan:
    """The plan of one trial inside the sweep's allocation: one srun step covering every node."""
    task = SlurmTask.from_env(env)
    if not task.job_id:
        raise DdpbenchError(
            "cluster.slurm.one_allocation=true runs the sweep inside its own SLURM job (SLURM_JOB_ID is not "
            "set): run the sweep with -m and the ddpbench_slurm launcher, which submits that job"
        )
    nnodes = int(cfg.cluster.nnodes)
    task.check_nodes(nnodes)
    job_id = task.job_id
    master_addr = allocation_hosts(task.nodelist)[0] if task.nodelist else "127.0.0.1"
    master_port, aggregator_port = derived_ports(f"{job_id}-{job.job_num}", 2, int(cfg.cluster.base_port))
    slurm = cfg.cluster.slurm
    return NodePlan(
        node_ranks=[0],
        master_addr=master_addr,
        master_port=master_port,
        aggregator_port=aggregator_port,
        owner=True,
        retry_on_port_clash=False,
        run_token=job_id,
        peer_record_wait_s=float(slurm.peer_record_wait_s),
        wrap_agent=partial(srun_argv, nnodes, slurm.cpus_per_task, slurm.gpus_per_node),
    )


def main(argv: Optional[List[str]] = None) -> int:
    """One node's task of a trial's srun step: fill in the node rank, run the agent, record this node."""
    parser = argparse.ArgumentParser(prog="python -m ddpbench.cluster.slurm_steps")
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    node_rank = SlurmTask.from_env().node_rank or 0
    command = [arg.replace(NODE_RANK_TOKEN, str(node_rank)) for arg in command]
    env = {key: value.replace(NODE_RANK_TOKEN, str(node_rank)) for key, value in os.environ.items()}
    job_dir = Path(args.job_dir)
    logs = job_dir / "logs"
    out = err = None
    if node_rank != 0:  # node 0 writes to the step's output: the agent's own logs
        logs.mkdir(parents=True, exist_ok=True)
        out = open(node_log_path(logs, node_rank, "stdout"), "wb")
        err = open(node_log_path(logs, node_rank, "stderr"), "wb")
    spawn_epoch = time.time()
    start = time.monotonic()
    child = subprocess.Popen(command, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, forward)
    code = child.wait()
    wall_s = time.monotonic() - start
    if node_rank != 0:
        write_json_atomic(node_record_path(job_dir, node_rank), node_entry(
            node_rank, socket.gethostname(), wall_s=wall_s, exit_code=code, spawn_epoch=spawn_epoch,
            exit_epoch=spawn_epoch + wall_s, stdout=str(node_log_path(logs, node_rank, "stdout")),
            stderr=str(node_log_path(logs, node_rank, "stderr")),
        ))
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
