"""DDP MLP, the reference workload (seeded Linear+GELU blocks on synthetic features), run by the harness as a file
(``torchrun src/ddpbench/workload/ddp_mlp.py ...``, ``traceml run ... --args ...``) or as a module (``python -m
ddpbench.workload.ddp_mlp ...``: without torchrun, a world of one); docs/workload.md."""

from __future__ import annotations

import time

_PROCESS_START_EPOCH: float = time.time()

import sys  # noqa: E402
from functools import partial  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from ddpbench.workload.args import RankArgs  # noqa: E402
from ddpbench.workload.base import Workload  # noqa: E402
from ddpbench.workload.harness import run  # noqa: E402
from ddpbench.workload.sizes import MlpSizes  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    import torch


class MLP(Workload[MlpSizes]):
    """Linear+GELU x ``--hidden-layers`` then a Linear to ``--num-classes``, on normal features with uniform labels."""

    name = "mlp"
    prog = "ddp_mlp"
    description = "DDP MLP trainer for ddpbench (runs under torchrun or traceml run)."
    sizes = MlpSizes

    def build_model(self, args: RankArgs[MlpSizes]) -> torch.nn.Module:
        import torch
        from torch import nn

        size = args.sizes
        torch.manual_seed(args.seed)
        widths = [size.input_dim] + [size.hidden_dim] * size.hidden_layers
        blocks = [layer for a, b in zip(widths, widths[1:]) for layer in (nn.Linear(a, b), nn.GELU())]
        return nn.Sequential(*blocks, nn.Linear(widths[-1], size.num_classes))

    def build_dataset(self, args: RankArgs[MlpSizes]) -> Any:
        from torch.utils.data import TensorDataset

        from ddpbench.workload import synthetic

        x = synthetic.normal((args.num_samples, args.sizes.input_dim), args.seed, stream=0)
        y = synthetic.uniform_int(0, args.sizes.num_classes, (args.num_samples,), args.seed, stream=1)
        return TensorDataset(x, y)


main = partial(run, MLP(), process_start_epoch=_PROCESS_START_EPOCH)


if __name__ == "__main__":
    sys.exit(main())
