"""Batches for the timed loop: the workload's dataset through a DistributedSampler + DataLoader.

The dataset is cycled epoch after epoch (``sampler.set_epoch``) with ``drop_last=True``, so
every step is a full batch; ``num_workers=0``.
"""

from __future__ import annotations

import argparse
from typing import Any, Iterator

from ddpbench.workload.runtime import Runtime


def build_loader(args: argparse.Namespace, rt: Runtime, dataset: Any) -> tuple[Any, Any]:
    """``dataset`` through a seeded DistributedSampler (shuffle, drop_last) and a DataLoader."""
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    sampler = DistributedSampler(
        dataset, num_replicas=rt.world_size, rank=rt.rank, shuffle=True, seed=args.seed, drop_last=True
    )
    loader = DataLoader(
        dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True,
        num_workers=0, pin_memory=rt.device == "cuda",
    )
    return loader, sampler


def endless_batches(loader: Any, sampler: Any) -> Iterator[Any]:
    """Batches forever, advancing the sampler's epoch at each pass."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yielded = False
        for batch in loader:
            yielded = True
            yield batch
        if not yielded:  # parse_args guarantees one global batch; guard anyway
            raise RuntimeError("data loader yielded no batch")
        epoch += 1
