"""One node's task of a trial's srun step (``cluster.slurm.one_allocation``): ``python -m ddpbench.cluster.slurm.steps``.

Inside the sweep's one allocation each trial is one agent whose argv is
``srun --nodes=N --ntasks-per-node=1 --kill-on-bad-exit=1 python -m ddpbench.cluster.slurm.steps --job-dir DIR -- CMD``
(:meth:`ddpbench.cluster.slurm.backend.SlurmBackend.wrap_agent`). CMD is the node command rendered with node rank
:data:`~ddpbench.cluster.base.NODE_RANK_TOKEN`, which each node's task replaces with its ``SLURM_NODEID``
(no shell quoting involved). Node 0's output goes to the agent's own logs (through srun); every other node
writes its own ``logs/node<r>.{stdout,stderr}.log`` and ``nodes/node<r>.json`` (hostname, wall, exit code)
in the shared attempt dir, which node 0 reads as with one job per trial. Node 0's wall is the srun step's
(it includes srun's step launch, the same for every mode).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

from ddpbench.cluster.base import NODE_RANK_TOKEN
from ddpbench.formats.layout import AttemptLayout
from ddpbench.formats.trial_record import node_entry
from ddpbench.io import write_json_atomic


def main(argv: Optional[List[str]] = None) -> int:
    """One node's task of a trial's srun step: fill in the node rank, run the agent, record this node."""
    parser = argparse.ArgumentParser(prog="python -m ddpbench.cluster.slurm.steps")
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    node_rank = int(os.environ.get("SLURM_NODEID") or 0)
    command = [arg.replace(NODE_RANK_TOKEN, str(node_rank)) for arg in command]
    env = {key: value.replace(NODE_RANK_TOKEN, str(node_rank)) for key, value in os.environ.items()}
    attempt = AttemptLayout(Path(args.job_dir))
    out = err = None
    attempt.logs.mkdir(parents=True, exist_ok=True)
    if node_rank != 0:  # node 0 writes to the step's output: the agent's own logs
        out = open(attempt.node_log(node_rank, "stdout"), "wb")
        err = open(attempt.node_log(node_rank, "stderr"), "wb")
    spawn_epoch = time.time()
    start = time.monotonic()
    guard = [sys.executable, "-m", "ddpbench.trial.guard", "--record", str(attempt.step_guard_record(node_rank)),
             "--parent", str(os.getpid()), "--", *command]  # nothing the command starts outlives this task
    child = subprocess.Popen(guard, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    code = child.wait()
    wall_s = time.monotonic() - start
    if node_rank != 0:
        write_json_atomic(attempt.node_record(node_rank), node_entry(
            node_rank, socket.gethostname(), wall_s=wall_s, exit_code=code, spawn_epoch=spawn_epoch,
            exit_epoch=spawn_epoch + wall_s, stdout=str(attempt.node_log(node_rank, "stdout")),
            stderr=str(attempt.node_log(node_rank, "stderr")),
        ))
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
