"""A plain Hugging Face Trainer job, as its users write it: a tiny GPT-2 from its config, random tokens.

Run by hand:  torchrun --nproc-per-node=2 tests/scripts/hf_trainer_script.py --max-steps=20
Nothing of ddpbench in it: under ddpbench the recorder attaches itself to the Trainer.
"""

import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class RandomTokens(torch.utils.data.Dataset):
    """Uniform random token sequences; the labels are the inputs (the model shifts them)."""

    def __init__(self, samples: int, seq_len: int, vocab: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.tokens = torch.randint(0, vocab, (samples, seq_len), generator=generator)

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": self.tokens[index], "labels": self.tokens[index]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--crash-at-step", type=int, default=None, help="raise inside the Trainer (tests)")
    parser.add_argument("--report-to", default="none")
    parser.add_argument("--output-dir", default="hf_out")
    args = parser.parse_args()

    config = GPT2Config(vocab_size=128, n_positions=16, n_embd=16, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    training = TrainingArguments(
        output_dir=args.output_dir, max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum, learning_rate=1e-3, logging_steps=10, save_strategy="no",
        report_to=args.report_to, use_cpu=True, ddp_backend="gloo", ddp_find_unused_parameters=False, dataloader_num_workers=0, disable_tqdm=True,
    )

    trainer = Trainer(model=model, args=training, train_dataset=RandomTokens(512, 16, 128))
    if args.crash_at_step is not None:
        from transformers import TrainerCallback

        class CrashAt(TrainerCallback):
            def on_step_end(self, a, state, control, **kwargs):
                if state.global_step == args.crash_at_step:
                    raise RuntimeError(f"user script crashed at step {state.global_step}")

        trainer.add_callback(CrashAt())
    trainer.train()


if __name__ == "__main__":
    main()
