"""What one trial measured, as the analysis uses it: a row of the collected table → its figures. Pure.

A foreign script's known metric names (:data:`KNOWN_METRICS`) stand in for throughput and step time; its
start-up/teardown split stays unknown (NaN, never 0)."""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from ddpbench.analysis.stats import to_float

#: the kinds of throughput figure, in order of preference: the metric names that feed the throughput and per-step
#: rows instead of rows of their own
THROUGHPUT_KINDS = KNOWN_METRICS = ("steps_per_s", "samples_per_s", "step_time_ms")


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    v = to_float(value)
    return v if math.isfinite(v) else None


def metric_value(row: Mapping[str, Any], name: str) -> float | None:
    """The figure ``name`` read from the workload's output (``metric_<name>``), None when absent."""
    return finite(row.get(f"metric_{name}"))


def step_ms(row: Mapping[str, Any]) -> float | None:
    """Mean step time in ms: the record's, else the ``step_time_ms`` metric, else 1000 / steps/s."""
    for value in (finite(row.get("step_time_ms_mean")), metric_value(row, "step_time_ms")):
        if value is not None:
            return value
    rate = finite(row.get("steps_per_s")) or metric_value(row, "steps_per_s")
    return 1000.0 / rate if rate else None


def throughput(row: Mapping[str, Any], kind: str) -> float | None:
    """The trial's throughput as ``kind`` (:data:`THROUGHPUT_KINDS`; ``step_time_ms``: 1000 / the mean step time, as
    steps/s), None when it lacks it."""
    if kind == "step_time_ms":
        ms = step_ms(row)
        return 1000.0 / ms if ms else None
    return finite(row.get(kind)) or metric_value(row, kind)


def json_column(row: Mapping[str, Any], column: str) -> dict[str, Any]:
    """The JSON object in the row's ``column`` (a ``*_json`` column of the collected table), {} when absent or not
    an object."""
    text = row.get(column)
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def config_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The trial's resolved config (``config_json``), {} when absent or unreadable."""
    return json_column(row, "config_json")


def custom_metrics(row: Mapping[str, Any]) -> dict[str, str]:
    """The trial's other figures (not :data:`KNOWN_METRICS`): name → unit ('' when none given)."""
    units = {name: figure.get("unit") if isinstance(figure, dict) else None
             for name, figure in json_column(row, "metrics_json").items() if name not in KNOWN_METRICS}
    return {str(name): str(unit) if unit else "" for name, unit in units.items()}
