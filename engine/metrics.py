"""Prometheus metrics (prometheus-client), one registry per process.

Names follow Prometheus conventions: counters end in ``_total``, durations are ``_seconds``.
Components receive a :class:`Metrics` instance (tests make their own, so counters do not leak
between them) and only ever increment, observe or set.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# The *_created series double the exposition size and no dashboard reads them.
disable_created_metrics()

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_PROBE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        # Engine
        self.probes = Counter(
            "upwatch_probes_total",
            "Probes run, by check kind and outcome.",
            ["kind", "outcome"],
            registry=r,
        )
        self.probe_phase = Histogram(
            "upwatch_probe_duration_seconds",
            "Probe duration by phase.",
            ["phase"],
            buckets=_PROBE_BUCKETS,
            registry=r,
        )
        self.lateness = Histogram(
            "upwatch_scheduler_lateness_seconds",
            "How late due probes started.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge("upwatch_probes_in_flight", "Probes running now.", registry=r)
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
        # API
        self.http_requests = Counter(
            "upwatch_http_requests_total",
            "API requests, by route and status code.",
            ["route", "status"],
            registry=r,
        )

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
