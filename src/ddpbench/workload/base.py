"""What a model must provide for the harness to train it: the :class:`Workload` interface (docs/workload.md). Methods
that build things import torch themselves: the harness parses the arguments before torch is imported."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Generic, Type

from ddpbench.workload.args import RankArgs, S
from ddpbench.workload.data import FeatureJitter, Transform
from ddpbench.workload.sizes import Sizes

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch.utils.data import Dataset


class Workload(abc.ABC, Generic[S]):
    """One model and its synthetic data, trained by the harness with DDP and AdamW; ``S``: its size arguments."""

    # short name written into the rank record (mlp, transformer, ...)
    name: ClassVar[str]
    # program name in --help and in error lines (<prog>: error: ...)
    prog: ClassVar[str]
    # one line for --help
    description: ClassVar[str] = ""
    # the dataclass of its size arguments (S): its flags, defaults and parsers
    sizes: ClassVar[Type[Sizes]]

    def check_arguments(self, args: RankArgs[S]) -> str | None:
        """A one-line problem with the parsed size arguments, or None (no torch here)."""
        return None

    @abc.abstractmethod
    def build_model(self, args: RankArgs[S]) -> torch.nn.Module:
        """The model, seeded from ``args.seed`` so every rank starts identical (on CPU; the harness moves it)."""

    @abc.abstractmethod
    def build_dataset(self, args: RankArgs[S]) -> Dataset[Any]:
        """A map-style dataset of ``args.num_samples`` (input, target) CPU samples, deterministic from ``args.seed``."""

    def sample_transform(self, args: RankArgs[S]) -> Transform:
        """The realistic loader's per-sample augmentation ``(input, target) -> (input, target)``, run in its workers."""
        return FeatureJitter()

    def loss_function(self, args: RankArgs[S]) -> Callable[[Any, Any], torch.Tensor]:
        """``loss(model_output, target)``; cross-entropy by default."""
        import torch

        return torch.nn.CrossEntropyLoss()
