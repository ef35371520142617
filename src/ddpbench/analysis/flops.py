"""Model FLOPs of the workload's MLP per rank and step, achieved TFLOP/s, and the GPU's peak for comparison. Pure.

Only the Linear layers' matrix products count, so the achieved rate is a lower bound (docs/analysis.md)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ddpbench.choices import Precision


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of one training step on one rank (matrix products only; see the module docstring)."""

    # forward pass, FLOPs
    forward: int
    # backward pass (input and weight gradients), FLOPs
    backward: int

    @property
    def total(self) -> int:
        """Forward + backward, FLOPs per rank per step."""
        return self.forward + self.backward


def mlp_linear_shapes(input_dim: int, hidden_dim: int, hidden_layers: int, num_classes: int) -> tuple[tuple[int, int], ...]:
    """``(in_features, out_features)`` of every Linear of ``ddp_mlp.build_model``, input to output."""
    for name, value in (("input_dim", input_dim), ("hidden_dim", hidden_dim),
                        ("hidden_layers", hidden_layers), ("num_classes", num_classes)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    widths = [input_dim] + [hidden_dim] * hidden_layers + [num_classes]
    return tuple(zip(widths[:-1], widths[1:]))


def mlp_step_flops(batch_size: int, input_dim: int, hidden_dim: int, hidden_layers: int, num_classes: int, *,
                   input_grad: bool = True) -> StepFlops:
    """FLOPs of one step of the MLP on one rank's ``batch_size`` samples; ``input_grad=False`` drops the first
    Linear's input gradient (autograd does not compute it)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    shapes = mlp_linear_shapes(input_dim, hidden_dim, hidden_layers, num_classes)
    forward = sum(2 * i * o for i, o in shapes) * batch_size
    backward = 2 * forward
    if not input_grad:
        first_in, first_out = shapes[0]
        backward -= 2 * first_in * first_out * batch_size
    return StepFlops(forward=forward, backward=backward)


def step_flops_for_model(model: Mapping[str, Any], *, input_grad: bool = True) -> StepFlops:
    """:func:`mlp_step_flops` from a ``model`` config group (``conf/model/*.yaml`` keys)."""
    return mlp_step_flops(
        int(model["batch_size"]), int(model["input_dim"]), int(model["hidden_dim"]),
        int(model["hidden_layers"]), int(model["num_classes"]), input_grad=input_grad,
    )


def achieved_tflops(flops_per_step: float, step_ms: float) -> float:
    """TFLOP/s (10**12 FLOPs per second) of ``flops_per_step`` done every ``step_ms`` milliseconds."""
    if not (step_ms > 0 and math.isfinite(step_ms)):
        raise ValueError(f"step_ms must be a positive finite number, got {step_ms}")
    return flops_per_step / (step_ms * 1e-3) / 1e12


@dataclass(frozen=True)
class GpuPeak:
    """A GPU's peak dense rates, TFLOP/s; None where the precision has no fast path on it."""

    # case-insensitive regular expression searched in the device name torch reports, and the part it stands for
    pattern: str
    label: str
    # fp16 and bf16 tensor-core matrix rates, dense (no structured sparsity); plain fp32 (no TF32), CUDA cores
    fp16: float | None
    bf16: float | None
    fp32: float | None


# From NVIDIA's product datasheets (dense: half the "with sparsity" figure where only that is printed), at boost
# clock. The first pattern found in the name wins, so specific parts come first.
GPU_PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak(r"\bT4\b", "Tesla T4", fp16=65.0, bf16=None, fp32=8.1),
    GpuPeak(r"V100.*SXM", "V100 SXM2", fp16=125.0, bf16=None, fp32=15.7),
    GpuPeak(r"V100", "V100 PCIe", fp16=112.0, bf16=None, fp32=14.0),
    GpuPeak(r"\bA10\b", "A10", fp16=125.0, bf16=125.0, fp32=31.2),
    GpuPeak(r"A100", "A100", fp16=312.0, bf16=312.0, fp32=19.5),
    GpuPeak(r"\bL4\b", "L4", fp16=121.0, bf16=121.0, fp32=30.3),
    GpuPeak(r"L40S", "L40S", fp16=362.0, bf16=362.0, fp32=91.6),
    GpuPeak(r"H100.*PCIe", "H100 PCIe", fp16=756.0, bf16=756.0, fp32=51.0),
    GpuPeak(r"H100.*NVL", "H100 NVL", fp16=835.0, bf16=835.0, fp32=60.0),
    GpuPeak(r"H100", "H100 SXM", fp16=989.0, bf16=989.0, fp32=67.0),
    GpuPeak(r"H200.*NVL", "H200 NVL", fp16=835.0, bf16=835.0, fp32=60.0),
    GpuPeak(r"H200", "H200 SXM", fp16=989.0, bf16=989.0, fp32=67.0),
)


def gpu_peak(gpu_name: str) -> GpuPeak | None:
    """The table row for a device name such as ``torch.cuda.get_device_name()`` gives; None if unknown."""
    for row in GPU_PEAKS:
        if re.search(row.pattern, gpu_name, flags=re.IGNORECASE):
            return row
    return None


def peak_tflops(gpu_name: str, precision: str) -> float | None:
    """Peak dense TFLOP/s of ``gpu_name`` at ``precision`` (fp16 | bf16 | fp32); None if not known."""
    if precision not in tuple(Precision):
        raise ValueError(f"precision must be one of {', '.join(Precision)}, got {precision!r}")
    row = gpu_peak(gpu_name)
    return None if row is None else getattr(row, precision)


def fraction_of_peak(achieved: float, gpu_name: str, precision: str) -> float | None:
    """``achieved`` TFLOP/s over the GPU's peak at ``precision`` (0.05 = 5 %); None if the peak is unknown."""
    peak = peak_tflops(gpu_name, precision)
    return None if peak is None else achieved / peak
