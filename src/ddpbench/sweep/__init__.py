"""A ddpbench sweep as the paired sweeper runs it: job order, up-front checks, progress lines, signals, the
report of an interrupted sweep; ``hydra_plugins.ddpbench_sweeper`` imports these only when a sweep runs."""
