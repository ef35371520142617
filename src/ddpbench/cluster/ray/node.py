"""The node side of the Ray backend: each node's actor (:class:`NodeAgent`) and its keeper (:func:`main`, in a
session of its own: docs/ray.md). Nothing of Ray is imported here: Ray imports this module on each node by reference.
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

from ddpbench.cluster.guarded import exit_status, guard_footprint, run_guarded
from ddpbench.errors import error_line
from ddpbench.workload.lifetime import signal_on_parent_death

#: seconds a node's guard gets to end its command before its actor is killed
STOP_GRACE_S = 10.0


class NodeAgent:
    """The actor of one node: :meth:`run` runs its node command; :meth:`stop` ends it from another thread."""

    def __init__(self) -> None:
        self.started: List[subprocess.Popen] = []

    def run(self, argv: List[str], env: Dict[str, str], cwd: str, stdout: str, stderr: str) -> Dict[str, Any]:
        """Run ``argv`` under the keeper and the guard; host, wall (s), exit code and the guard's footprint."""
        child_env = dict(env)
        child_env.pop("CUDA_VISIBLE_DEVICES", None)  # what Ray gave this actor, not what the driver host had
        if "CUDA_VISIBLE_DEVICES" in os.environ:
            child_env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        Path(stdout).parent.mkdir(parents=True, exist_ok=True)
        record = Path(stdout).parent / f".{Path(stdout).name}.guard.json"
        keeper = [sys.executable, "-m", "ddpbench.cluster.ray.node", str(record), "--", *argv]
        spawn_epoch = time.time()
        start = time.monotonic()
        with open(stdout, "wb") as out, open(stderr, "wb") as err:
            # a session of its own, so that Ray's kill of a dead worker's process group misses the guard under it
            child = subprocess.Popen(keeper, env=child_env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=err, start_new_session=True)
            self.started.append(child)
            code = child.wait()
        wall_s = time.monotonic() - start
        return {"hostname": socket.gethostname(), "wall_s": wall_s, "exit_code": code, "spawn_epoch": spawn_epoch,
                "exit_epoch": spawn_epoch + wall_s, "pid": os.getpid(), "footprint": guard_footprint(record)}

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


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m ddpbench.cluster.ray.node RECORD -- CMD...``: a node's keeper, the actor's child, which runs CMD
    under the guard (record at RECORD) and forwards SIGTERM/SIGINT to it.

    It takes the SIGKILL Ray sends a dying worker's children; the guard below it then gets SIGTERM
    (``PR_SET_PDEATHSIG``) and kills everything its command started.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--":
        return error_line("usage: RECORD -- CMD...", prog="ddpbench.cluster.ray.node")
    signal_on_parent_death(signal.SIGTERM)  # not Linux: nothing; the guard's own parent check still holds
    if os.getppid() == 1:
        return 143
    return exit_status(run_guarded(args[0], args[2:]))


if __name__ == "__main__":
    sys.exit(main())
