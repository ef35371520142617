"""Cluster backends: where a trial's node agents run and how they find each other.

Each built-in backend (``local``, ``static``, ``slurm``, ``ray``) lives in a folder of its own and registers
itself by its ``cluster.kind`` when this package is imported. Callers ask :func:`backend_for` and never test the
kind themselves.
"""

from __future__ import annotations

from ddpbench.cluster.base import _BACKENDS, NODE_RANK_TOKEN, Backend, NodePlan, TrialSlot, backend_for, register
from ddpbench.cluster.local import backend as _local  # noqa: F401  (each built-in backend registers itself)
from ddpbench.cluster.ray import backend as _ray  # noqa: F401
from ddpbench.cluster.slurm import backend as _slurm  # noqa: F401
from ddpbench.cluster.static import backend as _static  # noqa: F401

#: the backends that ship with ddpbench, by kind
BUILTIN_KINDS = tuple(sorted(_BACKENDS))

__all__ = ["BUILTIN_KINDS", "NODE_RANK_TOKEN", "Backend", "NodePlan", "TrialSlot", "backend_for", "register"]

