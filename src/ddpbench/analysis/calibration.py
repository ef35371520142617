"""Calibration: how well the paired differences recover the known costs an ``inject`` mode added.

A mode named ``inject*`` passes ``--inject-step-ms``, ``--inject-startup-sec`` and
``--inject-teardown-sec`` to the workload; its comparison with the baseline should recover those
costs as its per-step overhead and start-up/teardown differences. Pure functions of the pairs and
their rows in the collected table.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ddpbench.analysis.results import CALIBRATION_TOLERANCE_PCT, Calibration, CalibrationItem, PairRecord
from ddpbench.analysis.stats import mean, to_float
from ddpbench.analysis.switching import on_fraction, switched_of_rows

__all__ = ["INJECT_FLAGS", "applied_injection", "calibration"]


#: config.inject key -> the workload flag that applies it
INJECT_FLAGS = {"step_ms": "--inject-step-ms", "startup_s": "--inject-startup-sec", "teardown_s": "--inject-teardown-sec"}


def applied_injection(row: dict[str, Any], key: str) -> float:
    """The cost ``key`` the trial's workload got on average over its timed steps: under within-trial switching of
    the injected wait (``switching=blocks``) the per-step wait ran in the on-blocks only, so it is scaled by their
    share of the steps."""
    value = _configured_injection(row, key)
    if key == "step_ms" and row.get("switch_what") == "inject":
        share = on_fraction(row.get("switch_blocks_json"))
        return value * share if share is not None else value
    return value


def _configured_injection(row: dict[str, Any], key: str) -> float:
    """The cost ``key`` (``step_ms``, ``startup_s``, ``teardown_s``) the trial's workload really got.

    ``config.inject`` is present in every mode's resolved config (``native`` too, where it is
    ignored), so it is not what was applied. When the config records ``mode.workload_args``, the
    value of the matching ``--inject-*`` flag there is used (0 when the mode passes none); trials
    whose config has no ``mode.workload_args`` fall back to the ``inject_<key>`` column.
    """
    text = row.get("config_json")
    if isinstance(text, str) and text:
        try:
            config = json.loads(text)
        except ValueError:
            config = None
        args = (config.get("mode") or {}).get("workload_args") if isinstance(config, dict) else None
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


def calibration(
    pairs: list[PairRecord], sides: list[tuple[dict, dict]], tolerance_pct: float = CALIBRATION_TOLERANCE_PCT
) -> Calibration | None:
    """How well the pairs' differences recover the injected costs (None when no cost is recorded).

    ``sides`` holds each pair's (baseline row, mode row) of the collected table, in ``pairs`` order.
    """
    spec = (
        ("step_ms", "per-step overhead", "ms", "step_overhead_ms"),
        ("startup_s", "startup difference", "s", "startup_diff_s"),
        ("teardown_s", "teardown difference", "s", "teardown_diff_s"),
    )
    items = []
    for key, name, unit, metric in spec:
        injected = mean([applied_injection(x, key) - applied_injection(b, key) for b, x in sides])
        if not math.isfinite(injected):
            continue
        recovered = mean([getattr(p, metric) for p in pairs])
        if injected == 0:
            items.append(CalibrationItem(name, unit, 0.0, recovered, math.nan, None))
            continue
        err = 100.0 * (recovered - injected) / injected
        items.append(CalibrationItem(name, unit, injected, recovered, err, abs(err) <= tolerance_pct))
    within = switched_of_rows([x for _, x in sides])
    if within is not None and within.what == "inject":  # the within-trial figure recovers the whole wait
        injected = mean([_configured_injection(x, "step_ms") for _, x in sides])
        err = 100.0 * (within.overhead_ms - injected) / injected if injected else math.nan
        items.append(CalibrationItem("within-trial per-step cost", "ms", injected, within.overhead_ms, err,
                                     abs(err) <= tolerance_pct if injected else None))
    return Calibration(tuple(items), tolerance_pct) if items else None
