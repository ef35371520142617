"""ddpbench.trial."""
