"""Achieved model TFLOP/s and fraction of the GPU's peak per mode, for MLP trials on CUDA (else unknown, with why)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence, cast

from ddpbench.analysis.figures import config_of, step_ms
from ddpbench.analysis.flops import achieved_tflops, fraction_of_peak, step_flops_for_model
from ddpbench.analysis.results import Efficiency
from ddpbench.analysis.stats import mean


def workload_of(row: Mapping[str, Any]) -> str:
    """The trial's workload: the condition's ``workload``, the record's, the config's, else ``mlp`` (version 1)."""
    for value in (row.get("cond_workload"), row.get("workload")):
        if isinstance(value, str) and value:
            return value
    workload = config_of(row).get("workload")
    if isinstance(workload, dict) and isinstance(workload.get("name"), str):
        return workload["name"]
    return "mlp"


def _trial_tflops(row: Mapping[str, Any]) -> tuple[float | None, str | None, int | None, str | None, str | None]:
    """(TFLOP/s, GPU name, FLOPs per step, precision, why unknown) of one trial."""
    config = config_of(row)
    cluster = config["cluster"] if isinstance(config.get("cluster"), dict) else {}
    precision = str(cluster.get("precision") or "fp32")
    gpus = [g for g in str(row.get("env_gpu_names") or "").split(",") if g and g != "nan"]
    workload = workload_of(row)
    if workload != "mlp":
        return None, None, None, precision, f"model FLOPs are counted for the MLP only (workload {workload})"
    if cluster.get("device") != "cuda" or not gpus:
        return None, None, None, precision, "CPU trial: no GPU peak to compare with"
    try:
        flops = step_flops_for_model(config.get("model") or {}).total
    except (KeyError, TypeError, ValueError) as exc:
        return None, gpus[0], None, precision, f"model sizes not in the config ({exc})"
    ms = step_ms(row)
    if not ms:
        return None, gpus[0], flops, precision, "no step time"
    return achieved_tflops(flops, ms), gpus[0], flops, precision, None


def efficiency(mode: str, rows: Sequence[Mapping[str, Any]]) -> Efficiency:
    """Mean achieved TFLOP/s and fraction of peak over ``mode``'s trials ``rows`` (or why unknown)."""
    per = [_trial_tflops(r) for r in rows]
    known = [p for p in per if p[0] is not None]
    if not known:
        note = per[0][4] if per else "no trials"
        precision = per[0][3] if per else None
        return Efficiency(mode, len(rows), None, None, None, None, precision, note)
    tflops = mean([cast(float, p[0]) for p in known])  # known: p[0] is not None
    _, gpu, flops, precision, _ = known[0]
    assert gpu is not None and precision is not None
    try:
        fraction = fraction_of_peak(tflops, gpu, precision)
    except ValueError:
        fraction = None
    note = None if fraction is not None else f"peak of {gpu} at {precision} unknown"
    return Efficiency(mode, len(known), flops, tflops, fraction, gpu, precision, note)
