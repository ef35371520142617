"""What a model must provide for the workload harness to train it: the :class:`Workload` interface.

A workload is a small file: a subclass naming itself, adding its size arguments, building its
model and its synthetic dataset, plus a ``__main__`` calling :func:`ddpbench.workload.harness.run`.
Everything else (arguments shared by all workloads, stop rules, faults, injection, timing,
TraceML marking, the rank record) is the harness's. Methods that build things import torch
themselves: the harness parses the arguments before torch is imported.
"""

from __future__ import annotations

import abc
import argparse
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from ddpbench.workload.data import FeatureJitter

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch.utils.data import Dataset


class Workload(abc.ABC):
    """One model and its synthetic data, trained by the harness with DDP and AdamW."""

    name: ClassVar[str]
    """Short name written into the rank record (``mlp``, ``transformer``, ...)."""

    prog: ClassVar[str]
    """Program name in ``--help`` and in error lines (``<prog>: error: ...``)."""

    description: ClassVar[str] = ""
    """One line for ``--help``."""

    @abc.abstractmethod
    def add_arguments(self, group: Any) -> None:
        """Add the model's size arguments to the ``model and data`` argparse group."""

    def check_arguments(self, args: argparse.Namespace) -> str | None:
        """A one-line problem with the parsed size arguments, or None (no torch here)."""
        return None

    @abc.abstractmethod
    def build_model(self, args: argparse.Namespace) -> "torch.nn.Module":
        """The model, seeded from ``args.seed`` so every rank starts identical (on CPU; the harness moves it)."""

    @abc.abstractmethod
    def build_dataset(self, args: argparse.Namespace) -> "Dataset[Any]":
        """A map-style dataset of ``args.num_samples`` (input, target) CPU samples, deterministic from ``args.seed``."""

    def sample_transform(self, args: argparse.Namespace) -> Callable[[Any, Any], "tuple[Any, Any]"]:
        """The realistic loader's per-sample augmentation ``(input, target) -> (input, target)``.

        It runs in the loader's worker processes and should cost real CPU time, as a training
        job's input pipeline does. Default: :class:`ddpbench.workload.data.FeatureJitter`.
        """
        return FeatureJitter()

    def loss_function(self, args: argparse.Namespace) -> Callable[[Any, Any], "torch.Tensor"]:
        """``loss(model_output, target)``; cross-entropy by default."""
        import torch

        return torch.nn.CrossEntropyLoss()
