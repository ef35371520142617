"""Collect ``trial.json`` files into one table: :func:`collect_trials`, ``ddpbench-collect``."""

from ddpbench.collect.collector import CollectResult, collect_trials, find_trial_files, load_step_times, write_results

__all__ = ["CollectResult", "collect_trials", "find_trial_files", "load_step_times", "write_results"]
