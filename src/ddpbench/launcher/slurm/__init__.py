"""Launching Hydra jobs through SLURM from outside a job (the backend inside one is :mod:`ddpbench.cluster.slurm`).

- :mod:`~ddpbench.launcher.slurm.submit`: one SLURM job per Hydra job (``hydra/launcher=ddpbench_slurm``);
- :mod:`~ddpbench.launcher.slurm.allocation`: the whole sweep as one SLURM job (``cluster.slurm.one_allocation``).

Both need the trial layer (attempts, records, timeouts), so they sit above it.
"""
