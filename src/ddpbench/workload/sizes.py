"""The built-in workloads' own size arguments, one frozen dataclass each: the rank's flags (``--d-model``) and,
as the defaults of ``model.*``, the config's (``ddpbench.config.workload``). Nothing here imports torch."""

from __future__ import annotations

import dataclasses

from ddpbench.workload.flags import flag, positive_int


@dataclasses.dataclass(frozen=True)
class Sizes:
    """A workload's size arguments (this base: none)."""


@dataclasses.dataclass(frozen=True)
class MlpSizes(Sizes):
    """``ddp_mlp.py`` (and ``workload=lightning``): Linear+GELU blocks on normal features."""

    input_dim: int = flag(4096, "input features", parse=positive_int)
    hidden_dim: int = flag(4096, "width of each hidden layer", parse=positive_int)
    hidden_layers: int = flag(4, "Linear+GELU blocks before the output Linear", parse=positive_int)
    num_classes: int = flag(1000, "output classes", parse=positive_int)


@dataclasses.dataclass(frozen=True)
class TransformerSizes(Sizes):
    """``ddp_transformer.py`` (and ``workload=hf_trainer``): a decoder-only LM on uniform random tokens."""

    d_model: int = flag(512, "embedding width", parse=positive_int)
    layers: int = flag(4, "transformer blocks", parse=positive_int)
    heads: int = flag(8, "attention heads; must divide --d-model", parse=positive_int)
    seq_len: int = flag(64, "tokens per sample", parse=positive_int)
    vocab: int = flag(8192, "vocabulary size", parse=positive_int)


@dataclasses.dataclass(frozen=True)
class ConvnetSizes(Sizes):
    """``ddp_convnet.py``: a ResNet-style classifier on uniform random images."""

    width: int = flag(64, "channels of the stem and the first stage (doubled at each later stage)",
                      parse=positive_int)
    blocks: int = flag(2, "residual blocks per stage", parse=positive_int)
    stages: int = flag(4, "stages; each after the first halves the resolution", parse=positive_int)
    image_size: int = flag(32, "image height and width, pixels", parse=positive_int)
    channels: int = flag(3, "image channels", parse=positive_int)
    num_classes: int = flag(1000, "output classes", parse=positive_int)
