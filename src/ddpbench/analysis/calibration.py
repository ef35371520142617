"""Calibration: how well the paired differences recover the known costs a calibration mode injected. Pure.

Only items whose figure can show the cost in the baseline's loop (``knowable``) are judged against the tolerance;
docs/analysis.md says where each cost shows."""

from __future__ import annotations

import math
from typing import Any, Mapping

from ddpbench.analysis.device_split import Loop, loop_of
from ddpbench.analysis.figures import config_of, finite
from ddpbench.analysis.results import CALIBRATION_TOLERANCE_PCT, Calibration, CalibrationItem, PairRecord
from ddpbench.analysis.stats import mean, to_float
from ddpbench.analysis.switching import switched_of_rows


#: config.inject key -> the workload flag that applies it
INJECT_FLAGS = {"step_ms": "--inject-step-ms", "device_step_ms": "--inject-device-step-ms",
                "startup_s": "--inject-startup-sec", "teardown_s": "--inject-teardown-sec"}


def applied_injection(row: Mapping[str, Any], key: str) -> float:
    """The cost ``key`` (a :data:`INJECT_FLAGS` key) the trial's workload really got: its ``--inject-*`` flag in
    ``mode.workload_args`` (0 without one), else the ``inject_<key>`` column for configs without ``workload_args``."""
    args = (config_of(row).get("mode") or {}).get("workload_args")
    if isinstance(args, list):
        flag = INJECT_FLAGS[key]
        value = 0.0
        for i, arg in enumerate(str(a) for a in args):
            if arg.startswith(flag + "="):
                value = to_float(arg.split("=", 1)[1])
            elif arg == flag and i + 1 < len(args):
                value = to_float(args[i + 1])
        return value
    value = to_float(row.get(f"inject_{key}"))
    return value if math.isfinite(value) else 0.0


def _host_in_step(loop: Loop) -> tuple[bool | None, str]:
    if not loop.gpu:
        return True, "knowable: the loop runs on the host alone"
    if loop.synchronised or loop.host_bound:
        return True, f"knowable: {loop.describe()}"
    return False, f"hides: {loop.describe()}, a host wait hides in the host's lead"


def _host_in_idle(loop: Loop) -> tuple[bool | None, str]:
    if loop.synchronised or loop.host_bound:
        return True, "knowable: the GPU waits for the host through it"
    return False, f"hides: {loop.describe()}"


def _device_in_step(loop: Loop) -> tuple[bool | None, str]:
    if loop.synchronised or loop.host_bound is False:
        return True, f"knowable: {loop.describe()}"
    return False, f"hides: {loop.describe()}, a device wait runs in the GPU's idle time"


def _item(name: str, side: str, unit: str, injected: float, recovered: float, tolerance_pct: float,
          knowable: tuple[bool | None, str]) -> CalibrationItem:
    if injected == 0:
        return CalibrationItem(name, unit, 0.0, recovered, math.nan, None, side, None, "not injected")
    err = 100.0 * (recovered - injected) / injected if math.isfinite(recovered) else math.nan
    judged = knowable[0] is not False and math.isfinite(err)
    return CalibrationItem(name, unit, injected, recovered, err, abs(err) <= tolerance_pct if judged else None,
                           side, knowable[0], knowable[1])


def _both(loop: Loop) -> tuple[bool | None, str]:
    return loop.synchronised or None, "host and device waits together"


def _injected(sides: list[tuple[dict, dict]], key: str) -> float:
    return mean([applied_injection(x, key) - applied_injection(b, key) for b, x in sides])


def _diff(sides: list[tuple[dict, dict]], column: str) -> float:
    values = [(finite(b.get(column)), finite(x.get(column))) for b, x in sides]
    return mean([x - b for b, x in values if b is not None and x is not None])


def _per_step_items(pairs: list[PairRecord], sides: list[tuple[dict, dict]], loop: Loop,
                    tolerance_pct: float) -> list[CalibrationItem]:
    """The per-step waits: the host wait in the host step and GPU idle, the device wait in GPU busy and the step."""
    host, device = _injected(sides, "step_ms"), _injected(sides, "device_step_ms")
    step = mean([p.step_overhead_ms for p in pairs])
    items = []
    if math.isfinite(host) and (host or not device):
        knowable = _host_in_step(loop) if not device else _both(loop)
        items.append(_item("per-step overhead", "host", "ms", host + (device or 0.0), step, tolerance_pct, knowable))
        if loop.gpu and host:
            items.append(_item("host wait in GPU idle", "host", "ms", host, _diff(sides, "gpu_idle_ms_mean"),
                               tolerance_pct, _host_in_idle(loop)))
    if math.isfinite(device) and device:
        if loop.gpu:
            everywhere = (True, "knowable in any loop: the step's device events see device work")
            items.append(_item("device wait in GPU busy", "device", "ms", device, _diff(sides, "gpu_busy_ms_mean"),
                               tolerance_pct, everywhere))
        if not host:
            items.append(_item("device wait in the host step", "device", "ms", device, step, tolerance_pct,
                               _device_in_step(loop)))
    return items


def calibration(pairs: list[PairRecord], sides: list[tuple[dict, dict]],
                tolerance_pct: float = CALIBRATION_TOLERANCE_PCT) -> Calibration | None:
    """How well the pairs' differences recover the injected costs (None when no cost is recorded); ``sides``: each
    pair's (baseline row, mode row), in ``pairs`` order."""
    loop = loop_of([b for b, _ in sides])
    items = _per_step_items(pairs, sides, loop, tolerance_pct)
    for key, name, side in (("startup", "startup difference", "start-up"),
                            ("teardown", "teardown difference", "teardown")):
        injected = _injected(sides, f"{key}_s")
        if math.isfinite(injected):
            items.append(_item(name, side, "s", injected, mean([getattr(p, f"{key}_diff_s") for p in pairs]),
                               tolerance_pct, (True, "knowable: once per trial")))
    within = switched_of_rows([x for _, x in sides])
    if within is not None and within.what == "inject":  # the within-trial figure recovers the whole wait
        host = mean([applied_injection(x, "step_ms") for _, x in sides])
        device = mean([applied_injection(x, "device_step_ms") for _, x in sides])
        knowable = _host_in_step(loop) if not device else _device_in_step(loop) if not host else _both(loop)
        items.append(_item("within-trial per-step cost", "host" if not device else "device", "ms", host + device,
                           within.overhead_ms, tolerance_pct, knowable))
    return Calibration(tuple(items), tolerance_pct) if items else None
