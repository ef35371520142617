"""The built-in workloads' own size arguments, one frozen dataclass each: the rank's flags (``--d-model``) and,
as the defaults of ``model.*``, the config's (``ddpbench.config.workload``). Nothing here imports torch."""

from __future__ import annotations

import dataclasses
from functools import partial

from ddpbench.workload.flags import flag, positive_int

size = partial(flag, parse=positive_int)


@dataclasses.dataclass(frozen=True)
class Sizes:
    """A workload's size arguments (this base: none)."""


@dataclasses.dataclass(frozen=True)
class MlpSizes(Sizes):
    """``ddp_mlp.py`` (and ``workload=lightning``): Linear+GELU blocks on normal features."""

    input_dim: int = size(4096, "input features")
    hidden_dim: int = size(4096, "width of each hidden layer")
    hidden_layers: int = size(4, "Linear+GELU blocks before the output Linear")
    num_classes: int = size(1000, "output classes")


@dataclasses.dataclass(frozen=True)
class TransformerSizes(Sizes):
    """``ddp_transformer.py`` (and ``workload=hf_trainer``): a decoder-only LM on uniform random tokens."""

    d_model: int = size(512, "embedding width")
    layers: int = size(4, "transformer blocks")
    heads: int = size(8, "attention heads; must divide --d-model")
    seq_len: int = size(64, "tokens per sample")
    vocab: int = size(8192, "vocabulary size")


@dataclasses.dataclass(frozen=True)
class ConvnetSizes(Sizes):
    """``ddp_convnet.py``: a ResNet-style classifier on uniform random images."""

    width: int = size(64, "channels of the stem and the first stage (doubled at each later stage)")
    blocks: int = size(2, "residual blocks per stage")
    stages: int = size(4, "stages; each after the first halves the resolution")
    image_size: int = size(32, "image height and width, pixels")
    channels: int = size(3, "image channels")
    num_classes: int = size(1000, "output classes")
