"""Launching Hydra jobs through SLURM from outside a job: one SLURM job per Hydra job (``submit``) or the whole sweep
as one (``allocation``); the backend inside a job is :mod:`ddpbench.cluster.slurm`."""
