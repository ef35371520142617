"""Built-in workload ``lightning``: ddpbench's MLP (sized by ``model=``) as a LightningModule, trained by a standard
Lightning ``Trainer`` with ``strategy="ddp"``; run by path like the other workloads (docs/workload.md)."""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence

from ddpbench.choices import Device, DistBackend
from ddpbench.workload.args import parse_args
from ddpbench.workload.ddp_mlp import MLP
from ddpbench.workload.frameworks.builtin import prepare

def main(argv: Sequence[str] | None = None) -> int:
    """Train with the Lightning Trainer on this rank; the exit status."""
    workload = MLP()
    args = parse_args(workload, argv)
    prepare(args, "lightning")
    import lightning.pytorch as pl
    import torch
    from lightning.pytorch.strategies import DDPStrategy

    class MLPModule(pl.LightningModule):  # type: ignore[misc]
        """ddpbench's MLP, cross-entropy, AdamW."""

        def __init__(self) -> None:
            super().__init__()
            self.net = workload.build_model(args)
            self.loss = workload.loss_function(args)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            return self.loss(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=args.lr)

    loader = torch.utils.data.DataLoader(workload.build_dataset(args), batch_size=args.batch_size, shuffle=True,
                                         drop_last=True, num_workers=0)
    devices = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # torchrun's (a world of one without it)
    nodes = max(1, int(os.environ.get("WORLD_SIZE", "1")) // devices)
    backend = None if args.backend == DistBackend.auto else str(args.backend)
    precision: Any = {"fp32": "32-true", "bf16": "bf16-mixed", "fp16": "16-mixed"}[args.precision]  # Lightning's
    trainer = pl.Trainer(accelerator="gpu" if args.device == Device.cuda else "cpu", devices=devices, num_nodes=nodes,
                         strategy=DDPStrategy(process_group_backend=backend), precision=precision,
                         max_steps=args.warmup_steps + (args.steps or 1), logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(MLPModule(), loader)
    return 0


if __name__ == "__main__":
    sys.exit(main())
