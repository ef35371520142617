"""ddpbench.workload."""
