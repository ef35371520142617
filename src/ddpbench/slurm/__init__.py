"""SLURM, in one package: the backend inside a job, the submission of jobs, and every bounded wait on them.

- :mod:`~ddpbench.slurm.backend`: ``cluster.kind: slurm``, what a driver inside a SLURM job launches;
- :mod:`~ddpbench.slurm.steps`: one node's task of an srun step (``cluster.slurm.one_allocation``);
- :mod:`~ddpbench.slurm.wait`: job states from the controller and the one bounded wait;
- :mod:`~ddpbench.slurm.submit`: one SLURM job per Hydra job (``hydra/launcher=ddpbench_slurm``);
- :mod:`~ddpbench.slurm.allocation`: the whole sweep as one SLURM job.

Importing this package imports nothing else: the cluster registry imports the backend on first use.
"""
