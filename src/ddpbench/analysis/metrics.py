"""The per-pair metrics, each declared once: its name, unit, the figure its percentage is of, and what the verdict
calls it. The analysis computes them in this order, the report shows them in it. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from ddpbench.choices import Choice


class PairMetric(Choice):
    """A figure of one pair (tool trial minus baseline trial): a :class:`~ddpbench.analysis.results.PairRecord`
    field, except ``projected_overhead_pct``, which the analysis projects from two of them."""

    step_overhead_ms = "step_overhead_ms"
    step_overhead_pct = "step_overhead_pct"
    step_median_overhead_ms = "step_median_overhead_ms"
    step_median_overhead_pct = "step_median_overhead_pct"
    throughput_overhead_pct = "throughput_overhead_pct"
    wall_diff_s = "wall_diff_s"
    wall_overhead_pct = "wall_overhead_pct"
    startup_diff_s = "startup_diff_s"
    startup_diff_pct = "startup_diff_pct"
    train_diff_s = "train_diff_s"
    teardown_diff_s = "teardown_diff_s"
    teardown_diff_pct = "teardown_diff_pct"
    fixed_diff_s = "fixed_diff_s"
    projected_overhead_pct = "projected_overhead_pct"


@dataclass(frozen=True)
class PctBase:
    """The baseline figure a percentage metric is of: a side figure's name (``base_<figure>``) and its unit. The
    percentage is dropped when that figure is near zero (:func:`ddpbench.analysis.rows.near_zero`)."""

    figure: str
    unit: str


@dataclass(frozen=True)
class MetricSpec:
    """One per-pair metric: its ``unit`` as the report shows it, the figure its percentage is of (None: an absolute
    metric, or a percentage never dropped), and what the verdict calls it (None: it never decides the verdict)."""

    name: PairMetric
    unit: str
    pct_base: PctBase | None = None
    verdict_name: str | None = None


#: every per-pair metric, absolute first and its percentage second, in the order computed and shown
PAIR_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(PairMetric.step_overhead_ms, "ms"),
    MetricSpec(PairMetric.step_overhead_pct, "%", PctBase("base_step_ms", "ms"), "between-trial per-step"),
    MetricSpec(PairMetric.step_median_overhead_ms, "ms"),
    MetricSpec(PairMetric.step_median_overhead_pct, "%", PctBase("base_step_median_ms", "ms")),
    MetricSpec(PairMetric.throughput_overhead_pct, "%"),
    MetricSpec(PairMetric.wall_diff_s, "s"),
    MetricSpec(PairMetric.wall_overhead_pct, "%", PctBase("base_wall_s", "s")),
    MetricSpec(PairMetric.startup_diff_s, "s"),
    MetricSpec(PairMetric.startup_diff_pct, "%", PctBase("base_startup_s", "s")),
    MetricSpec(PairMetric.train_diff_s, "s"),
    MetricSpec(PairMetric.teardown_diff_s, "s"),
    MetricSpec(PairMetric.teardown_diff_pct, "%", PctBase("base_teardown_s", "s")),
    MetricSpec(PairMetric.fixed_diff_s, "s"),
    MetricSpec(PairMetric.projected_overhead_pct, "%", PctBase("base_step_ms", "ms"), "projected onto the job"),
)
_BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in PAIR_METRICS}


def pair_metric(name: str) -> MetricSpec | None:
    """The metric a record or a table names (None for a name that is not a per-pair metric)."""
    return _BY_NAME.get(name)
