"""ddpbench: what a training-observability tool costs a PyTorch DDP training job.

Data flows workload -> trial -> collect -> analysis -> report (docs/architecture.md). Import-light: the workload
imports from the package at start-up.
"""

__version__ = "0.1.0"
