"""What the tests share: bounded process runs and waits (processes), the real ddpbench command line (cli),
trial records made for pure tests (trials), checks of a finished sweep (sweeps), the local SLURM cluster (slurm)."""
