"""Reading one sample of Prometheus metrics, from a ``Metrics`` registry in the test's process
or from the text of a ``/metrics`` page."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from engine.runtime.metrics import Metrics


def sample_value(source: Metrics | str, name: str, **labels: str) -> float | None:
    """The value of the first sample called ``name`` whose labels include ``labels``, or None
    when there is no such sample: a metric missing from the page is not a zero."""
    families: Iterable[Metric] = (
        text_string_to_metric_families(source) if isinstance(source, str)
        else source.registry.collect()
    )
    for family in families:
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


def sample(source: Metrics | str, name: str, **labels: str) -> float:
    """:func:`sample_value`, 0.0 when the sample is missing: a labelled counter has no sample
    for a label until it first counts there."""
    value = sample_value(source, name, **labels)
    return 0.0 if value is None else value
