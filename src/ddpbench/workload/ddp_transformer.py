"""DDP transformer, run by the workload harness like ``ddp_mlp.py``: a decoder-only LM on synthetic tokens (token +
position embeddings, ``--layers`` pre-norm blocks of causal self-attention and a GELU MLP, a final LayerNorm, a
vocabulary head; next-token cross-entropy). Many small modules per step: what automatic instrumentation that hooks
modules pays most for."""

from __future__ import annotations

import time

_PROCESS_START_EPOCH: float = time.time()

import sys  # noqa: E402
from functools import partial  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from ddpbench.workload.args import RankArgs  # noqa: E402
from ddpbench.workload.base import Workload  # noqa: E402
from ddpbench.workload.harness import run  # noqa: E402
from ddpbench.workload.sizes import TransformerSizes  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    import torch


class TokenCrossEntropy:
    """Next-token cross-entropy: logits (batch, seq, vocab) against targets (batch, seq)."""

    def __call__(self, logits: Any, targets: Any) -> Any:
        import torch.nn.functional as F

        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class TokenNoise:
    """Realistic-loader transform: each input token is replaced by a random one with probability ``p``."""

    def __init__(self, vocab: int, p: float = 0.1) -> None:
        self.vocab = vocab
        self.p = p

    def __call__(self, x: Any, y: Any) -> "tuple[Any, Any]":
        import torch

        noisy = torch.rand(x.shape) < self.p
        return torch.where(noisy, torch.randint_like(x, self.vocab), x), y


class Transformer(Workload[TransformerSizes]):
    """Decoder-only LM on uniform random tokens (inputs: a sequence, targets: it shifted by one)."""

    name = "transformer"
    prog = "ddp_transformer"
    description = "DDP decoder-only transformer LM trainer for ddpbench (runs under torchrun or traceml run)."
    sizes = TransformerSizes

    def check_arguments(self, args: RankArgs[TransformerSizes]) -> str | None:
        if args.sizes.d_model % args.sizes.heads:
            return f"--d-model {args.sizes.d_model} is not a multiple of --heads {args.sizes.heads}"
        return None

    def build_model(self, args: RankArgs[TransformerSizes]) -> torch.nn.Module:
        import torch
        import torch.nn.functional as F
        from torch import nn

        size = args.sizes

        class CausalSelfAttention(nn.Module):
            def __init__(self, d: int, heads: int) -> None:
                super().__init__()
                self.heads = heads
                self.qkv = nn.Linear(d, 3 * d)
                self.proj = nn.Linear(d, d)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                b, t, d = x.shape
                q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                return self.proj(y.transpose(1, 2).reshape(b, t, d))

        class Block(nn.Module):
            def __init__(self, d: int, heads: int) -> None:
                super().__init__()
                self.ln1 = nn.LayerNorm(d)
                self.attn = CausalSelfAttention(d, heads)
                self.ln2 = nn.LayerNorm(d)
                self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                x = x + self.attn(self.ln1(x))
                return x + self.mlp(self.ln2(x))

        class DecoderLM(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.tokens = nn.Embedding(size.vocab, size.d_model)
                self.positions = nn.Embedding(size.seq_len, size.d_model)
                self.blocks = nn.ModuleList(Block(size.d_model, size.heads) for _ in range(size.layers))
                self.norm = nn.LayerNorm(size.d_model)
                self.head = nn.Linear(size.d_model, size.vocab, bias=False)

            def forward(self, tokens: torch.Tensor) -> torch.Tensor:
                positions = torch.arange(tokens.shape[1], device=tokens.device)
                x = self.tokens(tokens) + self.positions(positions)
                for block in self.blocks:
                    x = block(x)
                return self.head(self.norm(x))

        torch.manual_seed(args.seed)
        return DecoderLM()

    def build_dataset(self, args: RankArgs[TransformerSizes]) -> Any:
        from torch.utils.data import TensorDataset

        from ddpbench.workload import synthetic

        size = args.sizes
        tokens = synthetic.uniform_int(0, size.vocab, (args.num_samples, size.seq_len + 1), args.seed)
        return TensorDataset(tokens[:, :-1], tokens[:, 1:])

    def sample_transform(self, args: RankArgs[TransformerSizes]) -> TokenNoise:
        return TokenNoise(args.sizes.vocab)

    def loss_function(self, args: RankArgs[TransformerSizes]) -> TokenCrossEntropy:
        return TokenCrossEntropy()


main = partial(run, Transformer(), process_start_epoch=_PROCESS_START_EPOCH)


if __name__ == "__main__":
    sys.exit(main())
