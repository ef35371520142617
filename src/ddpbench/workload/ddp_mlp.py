"""DDP MLP: the reference workload (seeded Linear+GELU blocks on synthetic features), run by the harness.

Run it as a file (``torchrun src/ddpbench/workload/ddp_mlp.py ...``,
``traceml run src/ddpbench/workload/ddp_mlp.py --args ...``) or as a module
(``python -m ddpbench.workload.ddp_mlp ...``; without torchrun it runs as a world of one).
The arguments shared by every workload, the stop rules, faults, timing and the rank record
are the harness's (:mod:`ddpbench.workload.harness`); see ``docs/workload.md``.
"""

from __future__ import annotations

import time

_PROCESS_START_EPOCH: float = time.time()

import sys  # noqa: E402
from typing import TYPE_CHECKING, Any, Sequence  # noqa: E402

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

    def build_model(self, args: RankArgs[MlpSizes]) -> "torch.nn.Module":
        import torch
        from torch import nn

        size = args.sizes
        torch.manual_seed(args.seed)
        layers: list[nn.Module] = []
        width = size.input_dim
        for _ in range(size.hidden_layers):
            layers += [nn.Linear(width, size.hidden_dim), nn.GELU()]
            width = size.hidden_dim
        layers.append(nn.Linear(width, size.num_classes))
        return nn.Sequential(*layers)

    def build_dataset(self, args: RankArgs[MlpSizes]) -> Any:
        from torch.utils.data import TensorDataset

        from ddpbench.workload import synthetic

        x = synthetic.normal((args.num_samples, args.sizes.input_dim), args.seed, stream=0)
        y = synthetic.uniform_int(0, args.sizes.num_classes, (args.num_samples,), args.seed, stream=1)
        return TensorDataset(x, y)


def main(argv: Sequence[str] | None = None) -> int:
    """Train the MLP on this rank. Returns the process exit status (0 on success)."""
    return run(MLP(), argv, process_start_epoch=_PROCESS_START_EPOCH)


if __name__ == "__main__":
    sys.exit(main())
