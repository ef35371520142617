"""Built-in workload ``hf_trainer``: a GPT-2 causal LM sized by ``model.transformer.*`` (no download), uniform
random tokens, trained by a standard ``transformers.Trainer`` with DDP; run by path (docs/workload.md)."""

from __future__ import annotations

import sys
from typing import Any, Sequence

from ddpbench.choices import Device, DistBackend, Precision
from ddpbench.workload.args import RankArgs, parse_args
from ddpbench.workload.ddp_transformer import Transformer
from ddpbench.workload.frameworks.builtin import prepare
from ddpbench.workload.sizes import TransformerSizes


class HFTrainerWorkload(Transformer):
    """The transformer workload's sizes and tokens, as a ``GPT2LMHeadModel`` trained by the HF Trainer."""

    name = "hf_trainer"
    prog = "hf_trainer_workload"
    description = "HF Trainer causal-LM workload for ddpbench (runs under torchrun or traceml run)."

    def build_model(self, args: RankArgs[TransformerSizes]) -> Any:
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        size = args.sizes
        torch.manual_seed(args.seed)
        config = GPT2Config(vocab_size=size.vocab, n_positions=size.seq_len, n_embd=size.d_model, n_layer=size.layers,
                            n_head=size.heads, bos_token_id=0, eos_token_id=0)
        return GPT2LMHeadModel(config)

    def build_dataset(self, args: RankArgs[TransformerSizes]) -> Any:
        tokens = super().build_dataset(args).tensors[0]

        class Tokens:  # HF's causal LMs shift the labels themselves
            def __len__(self) -> int:
                return len(tokens)

            def __getitem__(self, index: int) -> dict:
                return {"input_ids": tokens[index], "labels": tokens[index]}

        return Tokens()


def main(argv: Sequence[str] | None = None) -> int:
    """Train with the HF Trainer on this rank; the exit status."""
    workload = HFTrainerWorkload()
    args = parse_args(workload, argv)
    prepare(args, workload.name)
    from transformers import Trainer, TrainingArguments

    training = TrainingArguments(
        output_dir=args.tool_dir or "hf_trainer_out", max_steps=args.warmup_steps + (args.steps or 1),
        per_device_train_batch_size=args.batch_size, learning_rate=args.lr, seed=args.seed, save_strategy="no",
        logging_steps=args.log_every or 100, report_to="none", use_cpu=args.device == Device.cpu,
        ddp_backend=None if args.backend == DistBackend.auto else str(args.backend), ddp_find_unused_parameters=False,
        bf16=args.precision == Precision.bf16, fp16=args.precision == Precision.fp16, dataloader_num_workers=0, disable_tqdm=True,
        ddp_timeout=int(args.collective_timeout_sec or 1800),
    )
    Trainer(model=workload.build_model(args), args=training, train_dataset=workload.build_dataset(args)).train()
    return 0


if __name__ == "__main__":
    sys.exit(main())
