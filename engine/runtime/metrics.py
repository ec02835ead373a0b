"""Prometheus metrics (prometheus-client), one registry per process.

Names follow Prometheus conventions: counters end in ``_total``, durations are ``_seconds``.
Components receive a :class:`Metrics` instance (tests make their own, so counters do not leak
between them) and only ever increment (or decrement a gauge), observe or set.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# The *_created series double the exposition size and no dashboard reads them.
disable_created_metrics()

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_PROBE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _CounterChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class _GaugeChild(_CounterChild):
    __slots__ = ()

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount


class _HistogramChild:
    """Buckets and sum of one labelled series.

    ``observe`` is the ``append`` of a list of pending values: an observation is one C call,
    no Python frame (the engine makes four per probe). :meth:`fold` sorts the pending values
    (in C) and finds each bucket's share with one ``bisect_right`` per bound. Measured per
    value: a Python ``observe`` method (bisect and two additions) ~310 ns; append and this
    fold ~160 ns and ~440 instructions (callgrind); append and a fold that maps
    ``bisect_left`` into a ``collections.Counter`` about as fast but ~1,450 instructions.
    The exposition folds first, and the engine folds once a second, so that pending values
    stay few.
    """

    __slots__ = ("_bounds", "_pending", "counts", "observe", "observe_many", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0
        self._pending: list[float] = []
        self.observe: Callable[[float], None] = self._pending.append
        self.observe_many: Callable[[Iterable[float]], None] = self._pending.extend

    def fold(self) -> None:
        """Count the pending observations into the buckets and the sum."""
        pending = self._pending
        if not pending:
            return
        values = sorted(pending)
        pending.clear()  # the same list: ``observe`` is bound to it
        self.sum += sum(values)
        counts = self.counts
        below = 0
        # Bucket i counts values <= bounds[i] ("le") and above the bound before it.
        for i, bound in enumerate(self._bounds):
            upto = bisect_right(values, bound, below)
            counts[i] += upto - below
            below = upto
        counts[-1] += len(values) - below


class _LoopMetric(Collector):
    """Shared part of :class:`LoopCounter`, :class:`LoopGauge` and :class:`LoopHistogram`."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 registry: CollectorRegistry) -> None:
        self._name = name
        self._doc = documentation
        self._labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], object] = {}
        registry.register(self)

    def _key(self, labels: dict[str, str]) -> tuple[str, ...]:
        if set(labels) != set(self._labelnames):
            raise ValueError(f"{self._name}: labels must be {self._labelnames}")
        return tuple(str(labels[n]) for n in self._labelnames)


class LoopCounter(_LoopMetric):
    """A labelled counter for the engine's hot path, exposed as a Prometheus counter.

    ``prometheus_client``'s children take a lock on every ``inc`` (~0.5 us); the engine
    counts every probe from its one event-loop thread, where a plain float is enough. A
    scrape reads the current values (exact, not sampled). Use from one thread only.
    """

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (), *,
                 registry: CollectorRegistry) -> None:
        super().__init__(name.removesuffix("_total"), documentation, labelnames, registry)

    def labels(self, **labels: str) -> _CounterChild:
        key = self._key(labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = _CounterChild()
        assert isinstance(child, _CounterChild)
        return child

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._doc, labels=self._labelnames)
        for key, child in list(self._children.items()):
            assert isinstance(child, _CounterChild)
            family.add_metric(key, child.value)
        yield family


class LoopGauge(_LoopMetric):
    """A labelled gauge moved by ``inc``/``dec`` from the event-loop thread, without a lock
    (see :class:`LoopCounter`). A child stays once made, so a value back at 0 is exposed as
    0, not as a missing series."""

    def labels(self, **labels: str) -> _GaugeChild:
        key = self._key(labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = _GaugeChild()
        assert isinstance(child, _GaugeChild)
        return child

    def child(self, *values: str) -> _GaugeChild:
        """``labels()`` by position, in the order of the label names: one dict lookup (the
        engine moves a gauge for each check it loads)."""
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self._labelnames):
                raise ValueError(f"{self._name}: labels must be {self._labelnames}")
            child = self._children[values] = _GaugeChild()
        assert isinstance(child, _GaugeChild)
        return child

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self._name, self._doc, labels=self._labelnames)
        for key, child in list(self._children.items()):
            assert isinstance(child, _GaugeChild)
            family.add_metric(key, child.value)
        yield family


class LoopHistogram(_LoopMetric):
    """A labelled histogram for the engine's hot path, exposed as a Prometheus histogram.

    ``Histogram.observe`` costs ~1 us (a lock, a linear bucket search, several objects);
    the engine observes four of them per probe. Here an observation is a list append, from
    the event-loop thread only; :meth:`fold` (run by every scrape, and by the engine once a
    second) counts them into buckets (see :class:`_HistogramChild`), and a scrape reports
    cumulative buckets, so the exposition is the same as a Histogram's.
    """

    # ``observe(amount)``: without labels, the histogram observes directly (as
    # prometheus_client's does); it is then the child's own append, so an observation is no
    # Python call at all (the scheduler observes its lateness for every probe it starts).
    observe: Callable[[float], None]
    observe_many: Callable[[Iterable[float]], None]

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (), *,
                 buckets: Sequence[float], registry: CollectorRegistry) -> None:
        super().__init__(name, documentation, labelnames, registry)
        self._bounds = tuple(float(b) for b in buckets if b != float("inf"))
        if self._labelnames:
            self.observe = self.observe_many = self._needs_labels
        else:
            child = self.labels()
            self.observe, self.observe_many = child.observe, child.observe_many

    def _needs_labels(self, amount: object) -> None:
        raise ValueError(f"{self._name}: observe() of a labelled histogram needs labels()")

    def labels(self, **labels: str) -> _HistogramChild:
        key = self._key(labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = _HistogramChild(self._bounds)
        assert isinstance(child, _HistogramChild)
        return child

    def fold(self) -> None:
        """Count every child's pending observations (see :class:`_HistogramChild`)."""
        for child in list(self._children.values()):
            assert isinstance(child, _HistogramChild)
            child.fold()

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._doc, labels=self._labelnames)
        edges = [floatToGoString(b) for b in self._bounds] + ["+Inf"]
        for key, child in list(self._children.items()):
            assert isinstance(child, _HistogramChild)
            child.fold()
            total = 0
            buckets = []
            for edge, n in zip(edges, list(child.counts), strict=True):
                total += n
                buckets.append((edge, float(total)))
            family.add_metric(key, buckets, child.sum)
        yield family


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """The engine's load as of its last second (engine/scheduler/load.py): probes/s asked
    (sum of 1/interval over its checks), done, the capacity at the measured cost per probe
    (``cost_s`` by kind, CPU seconds) and the engine's ``share`` of its core; ``ratio`` is
    asked / capacity; ``overloaded`` turns on and off with hysteresis."""

    asked: float
    done: float
    capacity: float
    ratio: float
    overloaded: bool
    share: float
    waiting: int = 0
    cost_s: Mapping[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The form /healthz, the nodes table and ``upwatch status`` show."""
        return {
            "overloaded": self.overloaded,
            "ratio": round(self.ratio, 3),
            "asked_per_s": round(self.asked, 1),
            "done_per_s": round(self.done, 1),
            "capacity_per_s": round(self.capacity, 1),
            "engine_share": round(self.share, 2),
            "cost_us_by_kind": {k: round(v * 1e6, 1) for k, v in sorted(self.cost_s.items())},
        }


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        # The engine's load (None until an engine ran a second in this process).
        self.load: NodeLoad | None = None
        # Requests answered (reads, writes, heartbeat pings), plain counts: the engine reads
        # them each second to tell the API's CPU on the shared loop from the probes'
        # (engine/scheduler/load.py).
        self.api_reads = 0
        self.api_writes = 0
        self.api_pings = 0
        # Engine
        # The engine's per-probe series: plain counters without locks (see LoopCounter).
        self.probes = LoopCounter(
            "upwatch_probes_total",
            "Probes run, by check kind and outcome.",
            ["kind", "outcome"],
            registry=r,
        )
        self.probe_phase = LoopHistogram(
            "upwatch_probe_duration_seconds",
            "Probe duration by phase.",
            ["phase"],
            buckets=_PROBE_BUCKETS,
            registry=r,
        )
        self.lateness = LoopHistogram(
            "upwatch_scheduler_lateness_seconds",
            "How late due probes started.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        # Load and capacity (engine/scheduler/load.py)
        self.probes_asked_rate = Gauge(
            "upwatch_probes_asked_per_second",
            "Probes per second the node's enabled checks ask for (sum of 1/interval).",
            registry=r)
        self.probes_done_rate = Gauge(
            "upwatch_probes_done_per_second", "Probes finished in the last second.",
            registry=r)
        self.probe_capacity = Gauge(
            "upwatch_probe_capacity_per_second",
            "Probes per second the node can hold at its measured cost per probe.", registry=r)
        self.load_ratio = Gauge(
            "upwatch_probe_load_ratio",
            "Probes asked per second over capacity (above 1: over capacity).", registry=r)
        self.overloaded = Gauge(
            "upwatch_overloaded", "1 while the node is over its probing capacity.", registry=r)
        self.engine_share = Gauge(
            "upwatch_engine_cpu_share",
            "Share of its core the engine may spend starting probes (shrinks while the "
            "loop lags).", registry=r)
        self.probes_waiting = Gauge(
            "upwatch_probes_waiting", "Due checks waiting to start (held back).", registry=r)
        self.probe_cost = Gauge(
            "upwatch_probe_cost_seconds",
            "Measured CPU seconds per probe, by check kind (moving average).", ["kind"],
            registry=r)
        # Probe name lookups (engine/probes/resolver.py)
        self.dns_lookups = LoopCounter(
            "upwatch_dns_lookups_total", "DNS lookups sent (cache misses and refreshes).",
            registry=r,
        )
        self.dns_cache_hits = LoopCounter(
            "upwatch_dns_cache_hits_total", "Probe name lookups answered by the cache.",
            registry=r,
        )
        self.dns_failures = Counter(
            "upwatch_dns_failures_total", "Failed DNS lookups, by kind.", ["kind"], registry=r
        )
        self.dns_lookup_seconds = LoopHistogram(
            "upwatch_dns_lookup_seconds", "DNS lookup latency (cache misses).",
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.tls_handshakes = LoopCounter(
            "upwatch_tls_handshakes_total",
            "TLS handshakes of uptime probes, by whether they resumed a session.",
            ["resumed"], registry=r,
        )
        self.in_flight = Gauge("upwatch_probes_in_flight", "Probes running now.", registry=r)
        self.probe_polling = Gauge(
            "upwatch_probe_polling",
            "1 while the uptime probes' sockets are polled every probe_batch_ms (under load; "
            "their timings may then include that wait), 0 while each event is taken at once.",
            registry=r,
        )
        self.scheduled = Gauge(
            "upwatch_checks_scheduled", "Checks in this node's timing wheel.", registry=r
        )
        self.result_buffer = Gauge(
            "upwatch_result_buffer_depth", "Probe results waiting to be written.", registry=r
        )
        self.results_dropped = Counter(
            "upwatch_results_dropped_total",
            "Results dropped because the buffer was full during a database outage.",
            registry=r,
        )
        self.batch_write = Histogram(
            "upwatch_result_batch_write_seconds",
            "Time to write one results batch.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.results_written = Counter(
            "upwatch_results_written_total", "Probe result rows written.", registry=r
        )
        # Moved where the engine adopts, drops and changes a check, not recounted.
        self.checks_by_status = LoopGauge(
            "upwatch_checks_by_status",
            "Enabled checks this node probes, by kind and current status.",
            ["kind", "status"],
            registry=r,
        )
        self.transitions = Counter(
            "upwatch_state_transitions_total",
            "Check state changes, by new status.",
            ["kind", "status"],
            registry=r,
        )
        # Webhooks
        self.webhook_queue_depth = Gauge(
            "upwatch_webhook_queue_depth", "Webhook events waiting for delivery.", registry=r
        )
        self.webhook_oldest_pending = Gauge(
            "upwatch_webhook_oldest_pending_seconds", "Age of the oldest pending event.", registry=r
        )
        self.deliveries = Counter(
            "upwatch_webhook_deliveries_total", "Delivery tries, by result.", ["result"], registry=r
        )
        # Notification channels (engine.delivery.notify)
        self.notification_queue_depth = Gauge(
            "upwatch_notification_queue_depth", "Notifications waiting for delivery.",
            registry=r,
        )
        self.notification_oldest_pending = Gauge(
            "upwatch_notification_oldest_pending_seconds",
            "Age of the oldest pending notification.", registry=r,
        )
        self.notification_deliveries = Counter(
            "upwatch_notification_deliveries_total", "Notification tries, by result.",
            ["result"], registry=r,
        )
        # Cluster
        self.confirmations = Counter(
            "upwatch_confirmations_total",
            "Confirmation requests, by result.",
            ["result"],
            registry=r,
        )
        self.heartbeats = Counter(
            "upwatch_node_heartbeats_total", "Heartbeats written by this node.", registry=r
        )
        self.live_nodes = Gauge("upwatch_live_nodes", "Live nodes seen in the cluster.", registry=r)
        self.ownership_changes = Counter(
            "upwatch_ownership_changes_total",
            "Changes of the live-node set seen by this node; each moves checks between nodes.",
            registry=r,
        )
        self.node_info = Gauge(
            "upwatch_node_info", "This engine node (1): its id, region and version.",
            ["node", "region", "version"], registry=r,
        )
        # API
        self.http_requests = Counter(
            "upwatch_http_requests_total",
            "API requests, by route and status code.",
            ["route", "status"],
            registry=r,
        )
        self.http_request_seconds = Histogram(
            "upwatch_http_request_duration_seconds",
            "Time to answer an API request, by route.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )

    def fold(self) -> None:
        """Count the engine histograms' pending observations (the engine calls this once a
        second; a scrape does it too)."""
        self.probe_phase.fold()
        self.lateness.fold()
        self.dns_lookup_seconds.fold()

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
