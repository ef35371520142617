"""``hydra/launcher=ddpbench_slurm``: hydra-submitit-launcher's SLURM launcher whose every wait is bounded.

One SLURM job per trial (``nodes = cluster.nnodes``, one task per node), awaited with deadlines; a job that
died without a result becomes a failed trial; a job past its deadline is cancelled and recorded as a
timeout. The substance lives in :mod:`ddpbench.sweep.slurm_submit` (imported when a sweep launches, so
Hydra's plugin scan stays fast); the bounds are described in docs/slurm.md.
"""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher


@dataclass
class DdpbenchSlurmConf(SlurmQueueConf):
    """submitit_slurm, filled from ``cluster.slurm`` / ``cluster.nnodes`` by interpolation."""

    _target_: str = "hydra_plugins.ddpbench_sweeper.bounded_slurm_launcher.BoundedSlurmLauncher"
    name: str = "ddpbench"
    partition: Optional[str] = "${cluster.slurm.partition}"
    nodes: int = "${cluster.nnodes}"  # type: ignore[assignment]
    # one torchrun / traceml agent per node; it starts cluster.nproc_per_node ranks
    tasks_per_node: int = 1
    gpus_per_node: Optional[int] = "${cluster.slurm.gpus_per_node}"  # type: ignore[assignment]
    cpus_per_task: Optional[int] = "${cluster.slurm.cpus_per_task}"  # type: ignore[assignment]
    mem_gb: Optional[int] = "${cluster.slurm.mem_gb}"  # type: ignore[assignment]
    # minutes; null = ceil((trial timeout + wait_margin_s) / 60) per trial
    timeout_min: Optional[int] = "${cluster.slurm.timeout_min}"  # type: ignore[assignment]
    setup: Optional[List[str]] = "${cluster.slurm.setup}"  # type: ignore[assignment]
    additional_parameters: Dict[str, Any] = "${cluster.slurm.additional_parameters}"  # type: ignore[assignment]
    # trials are timed: never run two of a batch at once
    array_parallelism: int = 1
    # seconds before the time limit that submitit's USR2 comes; short, so it falls after the in-job watchdog
    signal_delay_s: int = 30
    # seconds added to the trial timeout for SLURM's --time
    wait_margin_s: float = "${cluster.slurm.wait_margin_s}"  # type: ignore[assignment]
    # seconds a job may stay queued before it is cancelled
    queue_timeout_s: float = "${cluster.slurm.queue_timeout_s}"  # type: ignore[assignment]
    # seconds between two checks of a job
    poll_s: float = "${cluster.slurm.poll_s}"  # type: ignore[assignment]


ConfigStore.instance().store(group="hydra/launcher", name="ddpbench_slurm", node=DdpbenchSlurmConf,
                             provider="ddpbench")


class BoundedSlurmLauncher(SlurmLauncher):
    """SlurmLauncher whose every wait is bounded; a job that left no result becomes a failed trial."""

    def __init__(self, **params: Any) -> None:
        from ddpbench.sweep.slurm_wait import Bounds

        super().__init__(**params)
        self.bounds = Bounds.from_params(self.params)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from ddpbench.sweep.slurm_submit import launch

        return launch(self, job_overrides, initial_job_idx)
