"""A ping (icmp://) monitor's row on the status page says its last probe's packet loss and
average round trip; an HTTP monitor's row does not."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engine.kinds.uptime import UptimeKind


@dataclass
class Shown:
    status: str = "ok"
    interval: int = 30
    last_check_at: datetime | None = None
    meta: dict[str, Any] = field(default_factory=dict)


NOW = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


def test_a_ping_monitor_shows_loss_and_round_trip() -> None:
    meta = {"http_status_code": None, "sent": 3, "received": 2, "packet_loss": 33.3,
            "rtt_min": 1.0, "rtt_avg": 1.25, "rtt_max": 1.5, "jitter": 0.5}
    facts = {name: value for name, value, _ in UptimeKind().status_facts(Shown(meta=meta), NOW)}
    assert facts["Packet loss"] == "33.3 %"
    assert facts["Round trip"] == "1.2 ms on average"
    assert "HTTP status" not in facts


def test_all_lost_shows_the_loss_without_a_round_trip() -> None:
    meta = {"http_status_code": None, "packet_loss": 100.0, "rtt_avg": None}
    facts = {name: value for name, value, _ in UptimeKind().status_facts(Shown(meta=meta), NOW)}
    assert facts["Packet loss"] == "100 %"
    assert "Round trip" not in facts


def test_an_http_monitor_shows_no_ping_figures() -> None:
    facts = {name for name, _, _ in
             UptimeKind().status_facts(Shown(meta={"http_status_code": 200}), NOW)}
    assert "HTTP status" in facts and "Packet loss" not in facts
