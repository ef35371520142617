"""The node side of the Ray backend: each node's actor (:class:`NodeAgent`) and its keeper (:func:`keep`).

The trial process (:mod:`ddpbench.cluster.ray.backend`) places one :class:`NodeAgent` per node; its
``run`` starts ``python -m ddpbench.cluster.ray.node RECORD -- CMD`` (the keeper, a session of its own),
which runs CMD (the node command: torchrun, ``traceml run``, a wrapper) under ddpbench's guard. Nothing of
Ray is imported here: Ray imports this module on each node by reference.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ddpbench.errors import error_line
from ddpbench.workload.lifetime import signal_on_parent_death

#: seconds a node's guard gets to end its command before its actor is killed
STOP_GRACE_S = 10.0


def run_node(argv: List[str], env: Dict[str, str], cwd: str, stdout: str, stderr: str,
             started: Optional[List[subprocess.Popen]] = None) -> Dict[str, Any]:
    """Inside a node's actor: run ``argv`` under the guard; host, wall and exit code.

    The command runs under :func:`keep` and the guard; the keeper is appended to ``started`` as soon as it
    runs, so that :meth:`NodeAgent.stop` can end it.
    """
    own = dict(os.environ)
    child_env = dict(env)
    for key in ("CUDA_VISIBLE_DEVICES",):  # what Ray gave this actor, not what the driver host had
        if key in own:
            child_env[key] = own[key]
        else:
            child_env.pop(key, None)
    Path(stdout).parent.mkdir(parents=True, exist_ok=True)
    record = Path(stdout).parent / f".{Path(stdout).name}.guard.json"
    keeper = [sys.executable, "-m", "ddpbench.cluster.ray.node", str(record), "--", *argv]
    spawn_epoch = time.time()
    start = time.monotonic()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        # a session of its own, so that Ray's kill of a dead worker's process group misses the guard under it
        child = subprocess.Popen(keeper, env=child_env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 start_new_session=True)
        if started is not None:
            started.append(child)
        code = child.wait()
    wall_s = time.monotonic() - start
    return {"hostname": socket.gethostname(), "wall_s": wall_s, "exit_code": code, "spawn_epoch": spawn_epoch,
            "exit_epoch": spawn_epoch + wall_s, "pid": os.getpid()}


class NodeAgent:
    """The actor of one node: runs its node command (:func:`run_node`); :meth:`stop` ends it from another thread.

    The trial process asks :meth:`stop` first (SIGTERM to the guard, which kills everything its command
    started, and records it) and kills the actor only after that.
    """

    def __init__(self) -> None:
        self.started: List[subprocess.Popen] = []

    def run(self, argv: List[str], env: Dict[str, str], cwd: str, stdout: str, stderr: str) -> Dict[str, Any]:
        return run_node(argv, env, cwd, stdout, stderr, self.started)

    def stop(self, grace_s: float) -> bool:
        """SIGTERM the keeper (and so the guard) and wait at most ``grace_s`` seconds for it; whether it ended."""
        ended = True
        for child in self.started:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    ended = False
        return ended


def keep(record: str, command: List[str]) -> int:
    """A node's keeper, the actor's child: runs ``command`` under the guard, forwards SIGTERM/SIGINT to it.

    Ray SIGKILLs the direct children of a worker that dies (a killed actor, its node lost), which would give
    a guard no chance to end the ranks under it (torchrun starts them in sessions of their own). The keeper
    takes that SIGKILL instead: the guard below it then gets SIGTERM (``PR_SET_PDEATHSIG``) and kills
    everything its command started. A worker that dies without that (its raylet gone) sends the keeper
    SIGTERM (``PR_SET_PDEATHSIG``), which it forwards to the guard; so does a keeper orphaned before it ran.
    """
    signal_on_parent_death(signal.SIGTERM)  # not Linux: nothing; the guard's own parent check still holds
    if os.getppid() == 1:
        return 143
    guard = subprocess.Popen([sys.executable, "-m", "ddpbench.trial.guard", "--record", record,
                              "--parent", str(os.getpid()), "--", *command], stdin=subprocess.DEVNULL)

    def forward(signum: int, _frame: object) -> None:
        if guard.poll() is None:
            guard.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    code = guard.wait()
    return code if code >= 0 else 128 - code


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m ddpbench.cluster.ray.node RECORD -- CMD...``: a node's keeper (:func:`keep`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--":
        return error_line("usage: RECORD -- CMD...", prog="ddpbench.cluster.ray.node")
    return keep(args[0], args[2:])


if __name__ == "__main__":
    sys.exit(main())
