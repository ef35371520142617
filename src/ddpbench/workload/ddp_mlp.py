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

import argparse  # noqa: E402
import sys  # noqa: E402
from typing import TYPE_CHECKING, Any, Sequence  # noqa: E402

from ddpbench.workload.args import positive_int  # noqa: E402
from ddpbench.workload.base import Workload  # noqa: E402
from ddpbench.workload.harness import run  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    import torch


class MLP(Workload):
    """Linear+GELU x ``--hidden-layers`` then a Linear to ``--num-classes``, on normal features with uniform labels."""

    name = "mlp"
    prog = "ddp_mlp"
    description = "DDP MLP trainer for ddpbench (runs under torchrun or traceml run)."

    def add_arguments(self, group: Any) -> None:
        group.add_argument("--input-dim", type=positive_int, default=4096)
        group.add_argument("--hidden-dim", type=positive_int, default=4096)
        group.add_argument("--hidden-layers", type=positive_int, default=4, help="Linear+GELU blocks before the output Linear")
        group.add_argument("--num-classes", type=positive_int, default=1000)

    def build_model(self, args: argparse.Namespace) -> "torch.nn.Module":
        import torch
        from torch import nn

        torch.manual_seed(args.seed)
        layers: list[nn.Module] = []
        width = args.input_dim
        for _ in range(args.hidden_layers):
            layers += [nn.Linear(width, args.hidden_dim), nn.GELU()]
            width = args.hidden_dim
        layers.append(nn.Linear(width, args.num_classes))
        return nn.Sequential(*layers)

    def build_dataset(self, args: argparse.Namespace) -> Any:
        from torch.utils.data import TensorDataset

        from ddpbench.workload import synthetic

        x = synthetic.normal((args.num_samples, args.input_dim), args.seed, stream=0)
        y = synthetic.uniform_int(0, args.num_classes, (args.num_samples,), args.seed, stream=1)
        return TensorDataset(x, y)


def main(argv: Sequence[str] | None = None) -> int:
    """Train the MLP on this rank. Returns the process exit status (0 on success)."""
    return run(MLP(), argv, process_start_epoch=_PROCESS_START_EPOCH)


if __name__ == "__main__":
    sys.exit(main())
