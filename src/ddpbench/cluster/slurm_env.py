"""The SLURM task this process runs in, read once from SLURM's environment.

The variable names are those submitit's ``SlurmJobEnvironment`` reads (``SLURM_JOB_ID``, ``SLURM_NODEID``,
``SLURM_JOB_NUM_NODES``, ``SLURM_NTASKS``, ``SLURM_JOB_NODELIST``), with the older aliases SLURM still
sets. submitit's class reads ``os.environ`` only; this one takes any mapping, so a plan can be checked
with a given environment. The allocation's hosts come from ``scontrol show hostnames`` (bounded), which
expands every node-list syntax the site's SLURM knows.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import List, Mapping, Optional

from ddpbench.errors import DdpbenchError

#: seconds ``scontrol show hostnames`` may take
SCONTROL_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class SlurmTask:
    """Where this process sits in its SLURM job (empty/zero fields: not set by SLURM)."""

    # the job id ("" outside a job)
    job_id: str
    # this task's node index in the allocation (None outside a job step)
    node_rank: Optional[int]
    # nodes of the allocation (0 = unknown)
    num_nodes: int
    # tasks of the job step (0 = unknown)
    num_tasks: int
    # the allocation's node list in SLURM's compressed syntax ("" = unknown)
    nodelist: str

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "SlurmTask":
        """Read the task from ``env`` (default: this process's environment)."""
        e = os.environ if env is None else env
        node = e.get("SLURM_NODEID")
        return cls(
            job_id=str(e.get("SLURM_JOB_ID") or ""),
            node_rank=int(node) if node else None,
            num_nodes=int(e.get("SLURM_JOB_NUM_NODES") or e.get("SLURM_NNODES") or 0),
            num_tasks=int(e.get("SLURM_NTASKS") or 0),
            nodelist=str(e.get("SLURM_JOB_NODELIST") or e.get("SLURM_NODELIST") or ""),
        )

    @property
    def in_step(self) -> bool:
        """Whether this process runs inside a SLURM job step (job id and node id set)."""
        return bool(self.job_id) and self.node_rank is not None

    def check_nodes(self, nnodes: int, hint: str = "") -> None:
        """Raise DdpbenchError when the allocation's node count is known and differs from ``nnodes``."""
        if self.num_nodes and self.num_nodes != nnodes:
            raise DdpbenchError(f"cluster.nnodes={nnodes} but SLURM job {self.job_id} has {self.num_nodes} "
                                f"node(s)" + (f": {hint}" if hint else ""))


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
