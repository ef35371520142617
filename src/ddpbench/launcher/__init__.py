"""Launchers: how a sweep's Hydra jobs reach a scheduler (one folder per scheduler; SLURM today)."""
