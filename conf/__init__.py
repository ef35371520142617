"""ddpbench's Hydra configs; installed as the package ``ddpbench.conf`` (see pyproject.toml)."""
