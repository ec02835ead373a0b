"""A down check whose probe has no HTTP status (tcp, tls, mail, dns, icmp: status_code
None, error None) is restored with its uptime_restored event, as an HTTP one is (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.domain import payloads
from engine.domain.evaluate import DOWN, OK, CheckState, evaluate_uptime
from engine.domain.outcomes import HttpOutcome

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def test_a_down_tcp_check_is_restored_with_its_event() -> None:
    prev = CheckState(status=DOWN, error="connection refused", last_check_at=T0,
                      failing_since=T0, detected_by="eu", verified_via="us", outage_id=7,
                      incident_event_id=99)
    answered = HttpOutcome(None, None, 4.0, None, 1.0, None, None)
    tr = evaluate_uptime(prev, answered, now=T0 + timedelta(minutes=5), region="eu",
                         threshold=0.0, slow_threshold_ms=3000.0)
    assert tr.state.status == OK
    assert tr.close_outage_id == 7
    [event] = tr.events
    assert event.event == payloads.UPTIME_RESTORED
    assert event.parent_id == 99
    assert event.fields["http_status_code"] == 0
    assert event.fields["downtime_seconds"] == 300.0
