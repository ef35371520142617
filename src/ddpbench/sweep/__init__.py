"""A ddpbench sweep as the paired sweeper runs it: job order, up-front checks, progress lines, signals, the
report of an interrupted sweep, and the two SLURM submission styles with their one bounded wait.

The Hydra plugins in ``hydra_plugins.ddpbench_sweeper`` stay thin and import these modules only when a
sweep runs.
"""
