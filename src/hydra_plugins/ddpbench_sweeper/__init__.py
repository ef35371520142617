"""ddpbench's paired sweeper for Hydra (``hydra/sweeper=paired``).

This module and its siblings must stay light: Hydra imports every plugin module at start-up.
"""
