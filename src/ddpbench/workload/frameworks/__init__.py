"""ddpbench's recorder attached to framework Trainers (HF, Lightning) from outside an unmodified script, by an import
hook that :data:`SITE_HOOK_DIR`'s ``sitecustomize`` installs in the ranks (docs/workload.md, "Framework jobs")."""

from __future__ import annotations

from pathlib import Path

SITE_HOOK_DIR = Path(__file__).resolve().parent / "site_hook"
"""The folder whose ``sitecustomize.py`` installs the hook (put first on the ranks' ``PYTHONPATH``)."""

ENV_HOOK = "DDPBENCH_FRAMEWORK_HOOK"
"""``1``: the hook attaches ddpbench's callback to framework Trainers (set by the trial)."""
ENV_TRACEML_CALLBACK = "DDPBENCH_TRACEML_CALLBACK"
"""``1``: the hook also adds TraceML's own framework callback (a mode's ``env``; needs ``traceml run``)."""

ENV_TOOL = "DDPBENCH_FRAMEWORK_TOOL"
"""A tool attached through the framework's own integration (a mode's ``env``): ``wandb`` (HF's ``WandbCallback``,
as ``report_to=["wandb"]`` adds it; Lightning's ``WandbLogger(offline=True)``) or ``torch_profiler`` (an HF
profiler callback; Lightning's ``PyTorchProfiler``). Output goes to ``$DDPBENCH_TOOL_DIR``."""
ENV_TOOL_DIR = "DDPBENCH_TOOL_DIR"
"""Where the framework-attached tool writes."""
ENV_PROFILER_SCHEDULE = "DDPBENCH_TORCH_PROFILER"
"""torch.profiler schedule ``wait,warmup,active,repeat`` (``tool.torch_profiler``)."""

SUPPORTED = {"transformers": (4, 30), "lightning": (2, 0), "pytorch_lightning": (2, 0)}
"""Lowest framework version (major, minor) whose callback API the hook uses."""
