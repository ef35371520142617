"""ddpbench's recorder attached to framework Trainers from outside an unmodified script.

A trial whose script trains with ``transformers.Trainer`` or a Lightning ``Trainer`` puts
:data:`SITE_HOOK_DIR` first on the ranks' ``PYTHONPATH``; its ``sitecustomize`` installs
:mod:`ddpbench.workload.frameworks.attach`'s import hook, which adds ddpbench's callback to every
Trainer the script builds (:mod:`.hf_callback`, :mod:`.pl_callback`). The callbacks time optimizer
steps with :class:`ddpbench.workload.recorder.Recorder` and stop the Trainer through its own stop flag.
"""

from __future__ import annotations

from pathlib import Path

SITE_HOOK_DIR = Path(__file__).resolve().parent / "site_hook"
"""The folder whose ``sitecustomize.py`` installs the hook (put first on the ranks' ``PYTHONPATH``)."""

ENV_HOOK = "DDPBENCH_FRAMEWORK_HOOK"
"""``1``: the hook attaches ddpbench's callback to framework Trainers (set by the trial)."""
ENV_TRACEML_CALLBACK = "DDPBENCH_TRACEML_CALLBACK"
"""``1``: the hook also adds TraceML's own framework callback (a mode's ``env``; needs ``traceml run``)."""

SUPPORTED = {"transformers": (4, 30), "lightning": (2, 0), "pytorch_lightning": (2, 0)}
"""Lowest framework version (major, minor) whose callback API the hook uses."""
