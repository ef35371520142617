"""The SLURM backend (``cluster.kind: slurm``): inside a SLURM job; srun steps; job states and the bounded wait."""
