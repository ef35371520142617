"""One node's task of a trial's srun step (``cluster.slurm.one_allocation``; ``SlurmBackend.wrap_agent``).

``srun ... python -m ddpbench.cluster.slurm.steps --job-dir DIR -- CMD``: CMD with its ``SLURM_NODEID`` for
:data:`~ddpbench.cluster.base.NODE_RANK_TOKEN`. Node 0's output goes to the agent's own logs; every other node
writes ``logs/node<r>.{stdout,stderr}.log`` and ``nodes/node<r>.json``.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path
from typing import List, Optional

from ddpbench.cluster.base import NODE_RANK_TOKEN
from ddpbench.cluster.guarded import exit_status, guard_footprint, run_guarded
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
    stdout, stderr = str(attempt.node_log(node_rank, "stdout")), str(attempt.node_log(node_rank, "stderr"))
    attempt.logs.mkdir(parents=True, exist_ok=True)
    spawn_epoch = time.time()
    start = time.monotonic()
    record = str(attempt.step_guard_record(node_rank))
    if node_rank == 0:  # node 0 writes to the step's output: the agent's own logs
        return exit_status(run_guarded(record, command, env=env))
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        code = run_guarded(record, command, env=env, stdout=out, stderr=err)
    wall_s = time.monotonic() - start
    write_json_atomic(attempt.node_record(node_rank), node_entry(
        node_rank, socket.gethostname(), wall_s=wall_s, exit_code=code, spawn_epoch=spawn_epoch,
        exit_epoch=spawn_epoch + wall_s, stdout=stdout, stderr=stderr, footprint=guard_footprint(record)))
    return exit_status(code)


if __name__ == "__main__":
    sys.exit(main())
