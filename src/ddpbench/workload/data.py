"""Batches for the timed loop: the workload's dataset through a DistributedSampler and a DataLoader (``--loader``
``synthetic`` or ``realistic``: docs/workload.md), cycled epoch after epoch with ``drop_last``."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator, cast

from ddpbench.choices import Device, Loader
from ddpbench.workload.args import RankArgs
from ddpbench.workload.runtime import Runtime

Transform = Callable[[Any, Any], "tuple[Any, Any]"]
"""A per-sample transform: ``(input, target) -> (input, target)``."""


class FeatureJitter:
    """Default per-sample transform: floating inputs get Gaussian noise (sd 0.01) and are standardised; integer inputs
    and the target pass unchanged (randomness from torch's per-worker seed)."""

    def __call__(self, x: Any, y: Any) -> "tuple[Any, Any]":
        import torch

        if not torch.is_floating_point(x):
            return x, y
        x = x + 0.01 * torch.randn_like(x)
        return (x - x.mean()) / (x.std() + 1e-6), y


class TransformedDataset:
    """``dataset[i]`` passed through ``transform`` (runs in the loader's worker processes)."""

    def __init__(self, dataset: Any, transform: Transform) -> None:
        self.dataset = dataset
        self.transform = transform

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> "tuple[Any, Any]":
        x, y = self.dataset[index]
        return self.transform(x, y)


def build_loader(args: RankArgs[Any], rt: Runtime, dataset: Any, transform: Transform) -> tuple[Any, Any]:
    """``dataset`` through a seeded DistributedSampler (shuffle, drop_last) and a DataLoader per ``--loader``."""
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torch.utils.data.distributed import DistributedSampler

    sampler: DistributedSampler[Any] = DistributedSampler(
        dataset, num_replicas=rt.world_size, rank=rt.rank, shuffle=True, seed=args.seed, drop_last=True
    )
    workers: dict[str, Any] = {"num_workers": 0}
    if args.loader == "realistic":  # TransformedDataset is a duck-typed map-style Dataset (torch-free module)
        dataset = cast(Dataset[Any], TransformedDataset(dataset, transform))
        workers = {"num_workers": args.loader_workers, "prefetch_factor": args.prefetch_factor,
                   "persistent_workers": True, "generator": torch.Generator().manual_seed(args.seed + rt.rank)}
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True,
                        pin_memory=rt.device == Device.cuda, **workers)
    return loader, sampler


def loader_description(args: RankArgs[Any], rt: Runtime) -> dict[str, Any]:
    """The rank record's ``data`` object: how batches were served."""
    realistic = args.loader == Loader.realistic
    return {
        "loader": args.loader,
        "workers": args.loader_workers if realistic else 0,
        "prefetch_factor": args.prefetch_factor if realistic else None,
        "pin_memory": rt.device == Device.cuda,
    }


def endless_batches(loader: Any, sampler: Any) -> Iterator[Any]:
    """Batches forever, advancing the sampler's epoch at each pass."""
    for epoch in itertools.count():
        sampler.set_epoch(epoch)
        yielded = False
        for batch in loader:
            yielded = True
            yield batch
        if not yielded:  # parse_args guarantees one global batch; guard anyway
            raise RuntimeError("data loader yielded no batch")
