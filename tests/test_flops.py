"""Model FLOPs, achieved TFLOP/s and GPU peaks (ddpbench.analysis.flops): known answers by hand."""

import pytest

from ddpbench.analysis.flops import (
    GPU_PEAKS,
    achieved_tflops,
    fraction_of_peak,
    gpu_peak,
    mlp_linear_shapes,
    mlp_step_flops,
    peak_tflops,
    step_flops_for_model,
)


def test_linear_shapes_follow_build_model():
    assert mlp_linear_shapes(32, 64, 2, 4) == ((32, 64), (64, 64), (64, 4))
    assert mlp_linear_shapes(8, 16, 1, 3) == ((8, 16), (16, 3))


def test_step_flops_small_known_answer():
    # Linear(2,3) + Linear(3,1): 2*(2*3 + 3*1) = 18 FLOPs per sample forward; batch 4 -> 72.
    flops = mlp_step_flops(batch_size=4, input_dim=2, hidden_dim=3, hidden_layers=1, num_classes=1)
    assert (flops.forward, flops.backward, flops.total) == (72, 144, 216)
    # without the first layer's input gradient: 144 - 2*2*3*4 = 96
    exact = mlp_step_flops(4, 2, 3, 1, 1, input_grad=False)
    assert (exact.forward, exact.backward) == (72, 96)


def test_seed_e2e_step_flops():
    # The reference model: 4 x Linear(4096, 4096) + Linear(4096, 1000), batch 256.
    per_sample_forward = 2 * (4 * 4096 * 4096 + 4096 * 1000)
    assert per_sample_forward == 142_409_728
    model = {"batch_size": 256, "input_dim": 4096, "hidden_dim": 4096, "hidden_layers": 4,
             "num_classes": 1000, "num_samples": 262144, "lr": 1e-3}
    flops = step_flops_for_model(model)
    assert flops.forward == 256 * per_sample_forward
    assert flops.total == 3 * 256 * per_sample_forward == 109_370_671_104


def test_achieved_tflops_and_fraction_on_the_reference_t4():
    # 109.37 GFLOP per step at the reference's 39.6 ms per step on a T4 -> 2.762 TFLOP/s, 4.25 % of 65.
    tflops = achieved_tflops(109_370_671_104, 39.6)
    assert tflops == pytest.approx(2.76188, rel=1e-5)
    assert fraction_of_peak(tflops, "Tesla T4", "fp16") == pytest.approx(2.76188 / 65.0, rel=1e-5)
    assert achieved_tflops(1e12, 1000.0) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "name, precision, peak",
    [
        ("Tesla T4", "fp16", 65.0),
        ("Tesla T4", "fp32", 8.1),
        ("Tesla T4", "bf16", None),  # no bf16 tensor cores on Turing
        ("NVIDIA H200", "bf16", 989.0),
        ("NVIDIA H200", "fp16", 989.0),
        ("NVIDIA H200 NVL", "bf16", 835.0),
        ("NVIDIA H100 80GB HBM3", "bf16", 989.0),
        ("NVIDIA H100 PCIe", "fp16", 756.0),
        ("NVIDIA A100-SXM4-80GB", "bf16", 312.0),
        ("NVIDIA A10", "fp16", 125.0),
        ("NVIDIA L4", "bf16", 121.0),
        ("NVIDIA L40S", "bf16", 362.0),
        ("Tesla V100-SXM2-16GB", "fp16", 125.0),
        ("Tesla V100-PCIE-16GB", "fp16", 112.0),
        ("NVIDIA A10G", "fp16", None),  # not in the table: no guess
        ("AMD Instinct MI300X", "bf16", None),
    ],
)
def test_peak_table_matches_device_names(name, precision, peak):
    assert peak_tflops(name, precision) == peak


def test_specific_parts_are_not_shadowed_by_general_patterns():
    assert gpu_peak("NVIDIA H100 NVL").label == "H100 NVL"
    assert gpu_peak("NVIDIA L40S").label == "L40S"  # "L4" must not match
    assert gpu_peak("NVIDIA A100 80GB PCIe").label == "A100"  # "A10" must not match
    assert {row.label for row in GPU_PEAKS} >= {"Tesla T4", "H200 SXM", "A100"}


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="precision"):
        peak_tflops("Tesla T4", "int8")
    with pytest.raises(ValueError, match="step_ms"):
        achieved_tflops(1e9, 0.0)
    with pytest.raises(ValueError, match="hidden_layers"):
        mlp_step_flops(1, 2, 3, 0, 1)
    with pytest.raises(ValueError, match="batch_size"):
        mlp_step_flops(0, 2, 3, 1, 1)
    assert fraction_of_peak(1.0, "unknown GPU", "fp16") is None
