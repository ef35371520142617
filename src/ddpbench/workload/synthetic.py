"""Seeded synthetic tensors, filled in parallel chunks: the built-in workloads' datasets in a fraction of the time.
Each chunk of :data:`CHUNK_ELEMENTS` along the first dimension has its own generator (seeded from the seed, the
stream and the chunk), so the values do not depend on the number of threads. Start-up figures: docs/gpu.md."""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    import torch

CHUNK_ELEMENTS = 1 << 23
"""Elements per chunk (8 Mi: 32 MiB of fp32): small enough to spread over 16 threads, large enough that a chunk's
own overhead (a generator, a thread hand-off) is negligible."""

MAX_THREADS = 16
"""At most this many threads fill chunks (the CPUs this process may run on, if fewer)."""


def chunk_seed(seed: int, stream: int, chunk: int) -> int:
    """The generator seed of chunk ``chunk`` of stream ``stream`` (features 0, labels 1, ...) of data seeded ``seed``."""
    return (int(seed) * 1_000_003 + int(stream) * 7_919 + int(chunk)) % (1 << 63)


def _fill(out: "torch.Tensor", seed: int, stream: int, draw: Callable[[Any, Any], None]) -> "torch.Tensor":
    """Fill ``out`` chunk by chunk along its first dimension: ``draw(chunk_view, generator)`` per chunk."""
    import torch

    row_elements = max(1, math.prod(out.shape[1:]))
    per_chunk = max(1, CHUNK_ELEMENTS // row_elements)

    def one(index_start: tuple[int, int]) -> None:
        index, start = index_start
        generator = torch.Generator().manual_seed(chunk_seed(seed, stream, index))
        draw(out[start:start + per_chunk], generator)

    chunks = list(enumerate(range(0, out.shape[0], per_chunk)))
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        available = os.cpu_count() or 1
    threads = min(MAX_THREADS, available, len(chunks))
    if threads <= 1:
        for item in chunks:
            one(item)
    else:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ddpbench-data") as pool:
            list(pool.map(one, chunks))
    return out


def normal(shape: tuple[int, ...], seed: int, stream: int = 0) -> "torch.Tensor":
    """A float32 tensor of ``shape`` drawn from N(0, 1), seeded by ``seed`` and ``stream``."""
    import torch

    return _fill(torch.empty(shape, dtype=torch.float32), seed, stream, lambda view, g: view.normal_(generator=g))


def uniform_int(low: int, high: int, shape: tuple[int, ...], seed: int, stream: int = 0,
                dtype: "torch.dtype | None" = None) -> "torch.Tensor":
    """An integer tensor of ``shape`` uniform on [low, high) (int64 unless ``dtype``), seeded by ``seed`` and ``stream``."""
    import torch

    out = torch.empty(shape, dtype=dtype or torch.int64)
    return _fill(out, seed, stream, lambda view, g: view.random_(low, high, generator=g))
