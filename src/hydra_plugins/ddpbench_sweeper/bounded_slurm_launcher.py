"""``hydra/launcher=ddpbench_slurm``: hydra-submitit-launcher's SLURM launcher whose every wait is bounded.

For any Hydra app; the work lives in :mod:`ddpbench.launcher.slurm`, imported only when a sweep launches
(docs/slurm.md). ddpbench's ``hydra/launcher=ddpbench`` fills it from ``cluster.slurm``.
"""

from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import DictConfig


@dataclass
class DdpbenchSlurmConf(SlurmQueueConf):
    """submitit_slurm's settings plus the bounds of every wait."""

    _target_: str = "hydra_plugins.ddpbench_sweeper.bounded_slurm_launcher.BoundedSlurmLauncher"
    # lines run before srun in the sbatch script (a list, not submitit's null, so ddpbench's conf can
    # interpolate a list into it)
    setup: Optional[List[str]] = field(default_factory=list)
    # minutes; null = ceil((trial timeout + wait_margin_s) / 60) for a ddpbench trial, else 60
    timeout_min: Optional[int] = None
    # never run two jobs of a batch at once (timed trials must not share the machines)
    array_parallelism: int = 1
    # seconds before the time limit that submitit's USR2 comes; short, so it falls after the in-job watchdog
    signal_delay_s: int = 30
    # seconds added to the trial timeout for SLURM's --time
    wait_margin_s: float = 120.0
    # seconds a job may stay queued before it is cancelled
    queue_timeout_s: float = 3600.0
    # seconds between two checks of a job
    poll_s: float = 1.0


ConfigStore.instance().store(group="hydra/launcher", name="ddpbench_slurm", node=DdpbenchSlurmConf,
                             provider="ddpbench")


class BoundedSlurmLauncher(SlurmLauncher):
    """SlurmLauncher whose every wait is bounded; a job that left no result becomes a failed job (or trial)."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from ddpbench.launcher.slurm.submit import Submitter

        return Submitter(self).launch(job_overrides, initial_job_idx)

    def run_one_allocation(self, config: DictConfig, sweep_name: str, trial_timeouts_s: Sequence[float]) -> int:
        """A ddpbench sweep with ``cluster.slurm.one_allocation=true`` as one SLURM job; its exit status."""
        from ddpbench.launcher.slurm.allocation import run

        return run(self.params, config, sweep_name, trial_timeouts_s)
