"""DDP convnet, run by the workload harness like ``ddp_mlp.py``: a ResNet-style classifier on synthetic uint8 images
(a 3x3 stem, ``--stages`` stages of ``--blocks`` residual basic blocks, each stage after the first halving the
resolution and doubling the width, global average pooling, a Linear classifier)."""

from __future__ import annotations

import time

_PROCESS_START_EPOCH: float = time.time()

import sys  # noqa: E402
from functools import partial  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from ddpbench.workload.args import RankArgs  # noqa: E402
from ddpbench.workload.base import Workload  # noqa: E402
from ddpbench.workload.harness import run  # noqa: E402
from ddpbench.workload.sizes import ConvnetSizes  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    import torch


class RandomCropFlip:
    """Realistic-loader transform: pad by ``pad`` pixels, crop back at a random offset, flip half the images."""

    def __init__(self, pad: int = 4) -> None:
        self.pad = pad

    def __call__(self, x: Any, y: Any) -> "tuple[Any, Any]":
        import torch
        import torch.nn.functional as F

        _, h, w = x.shape
        padded = F.pad(x, (self.pad, self.pad, self.pad, self.pad))
        top, left = (int(v) for v in torch.randint(0, 2 * self.pad + 1, (2,)))
        x = padded[:, top:top + h, left:left + w]
        if torch.rand(()) < 0.5:
            x = torch.flip(x, dims=(2,))
        return x.contiguous(), y


class ConvNet(Workload[ConvnetSizes]):
    """ResNet-style classifier on uniform random uint8 images with uniform labels."""

    name = "convnet"
    prog = "ddp_convnet"
    description = "DDP ResNet-style convnet trainer for ddpbench (runs under torchrun or traceml run)."
    sizes = ConvnetSizes

    def build_model(self, args: RankArgs[ConvnetSizes]) -> torch.nn.Module:
        import torch
        from torch import nn

        class ToUnitRange(nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x.float() / 127.5 - 1.0

        class BasicBlock(nn.Module):
            def __init__(self, cin: int, cout: int, stride: int) -> None:
                super().__init__()
                self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
                self.bn1 = nn.BatchNorm2d(cout)
                self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
                self.bn2 = nn.BatchNorm2d(cout)
                self.relu = nn.ReLU(inplace=True)
                self.shortcut: nn.Module = nn.Identity()
                if stride != 1 or cin != cout:
                    self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                                  nn.BatchNorm2d(cout))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                out = self.relu(self.bn1(self.conv1(x)))
                return self.relu(self.bn2(self.conv2(out)) + self.shortcut(x))

        size = args.sizes
        torch.manual_seed(args.seed)
        layers: list[nn.Module] = [
            ToUnitRange(),
            nn.Conv2d(size.channels, size.width, 3, padding=1, bias=False),
            nn.BatchNorm2d(size.width),
            nn.ReLU(inplace=True),
        ]
        width = size.width
        for stage in range(size.stages):
            out = size.width * 2**stage
            for block in range(size.blocks):
                layers.append(BasicBlock(width, out, 2 if stage > 0 and block == 0 else 1))
                width = out
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, size.num_classes)]
        return nn.Sequential(*layers)

    def build_dataset(self, args: RankArgs[ConvnetSizes]) -> Any:
        import torch
        from torch.utils.data import TensorDataset

        from ddpbench.workload import synthetic

        size = args.sizes
        shape = (args.num_samples, size.channels, size.image_size, size.image_size)
        images = synthetic.uniform_int(0, 256, shape, args.seed, stream=0, dtype=torch.uint8)
        labels = synthetic.uniform_int(0, size.num_classes, (args.num_samples,), args.seed, stream=1)
        return TensorDataset(images, labels)

    def sample_transform(self, args: RankArgs[ConvnetSizes]) -> RandomCropFlip:
        return RandomCropFlip()


main = partial(run, ConvNet(), process_start_epoch=_PROCESS_START_EPOCH)


if __name__ == "__main__":
    sys.exit(main())
