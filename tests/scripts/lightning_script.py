"""A plain Lightning job, as its users write it: a small LightningModule, random data, ``strategy="ddp"``.

Run by hand:  torchrun --nproc-per-node=2 tests/scripts/lightning_script.py --max-steps=20
Nothing of ddpbench in it: under ddpbench the recorder attaches itself to the Trainer.
"""

import argparse
import gc

import lightning.pytorch as pl
import torch


class Regressor(pl.LightningModule):
    """Linear+GELU layers, mean squared error; raises at ``crash_at_step`` when given (tests)."""

    def __init__(self, width: int, crash_at_step: int | None) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.GELU(), torch.nn.Linear(width, 1))
        self.crash_at_step = crash_at_step

    def training_step(self, batch, batch_idx):
        if self.crash_at_step is not None and self.global_step == self.crash_at_step:
            raise RuntimeError(f"user script crashed at step {self.global_step}")
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--crash-at-step", type=int, default=None)
    parser.add_argument("--end-process-group", action="store_true",
                        help="free the model and end the process group after fit, as a careful script does "
                             "(without ddpbench's recorder nothing else ends it before the interpreter exits)")
    args = parser.parse_args()

    generator = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(512, 16, generator=generator), torch.randn(512, 1, generator=generator))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True)
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=args.max_steps,
                         accumulate_grad_batches=args.grad_accum, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Regressor(args.width, args.crash_at_step), loader)
    if args.end_process_group and torch.distributed.is_initialized():
        del trainer
        gc.collect()
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
