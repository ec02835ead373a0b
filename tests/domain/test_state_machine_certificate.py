"""The certificate state machine, row by row of docs/design.md (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.domain import payloads
from engine.domain.certificate_states import evaluate_certificate
from engine.domain.evaluate import DOWN, OK, PENDING, CheckState, Outcome
from engine.domain.outcomes import CertOutcome

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
FROM = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
MONITOR = payloads.MonitorRef(3, "https://example.com/", "example")


def valid(valid_to: datetime = NOW + timedelta(days=60)) -> CertOutcome:
    return CertOutcome(True, None, "Test CA", "sha256WithRSAEncryption", False, FROM, valid_to,
                       12.0)


def invalid(error: str = "certificate expired") -> CertOutcome:
    return CertOutcome(False, error, "Test CA", "sha256WithRSAEncryption", False, FROM,
                       NOW - timedelta(days=1), 12.0)


def ev(prev: CheckState, o: CertOutcome, days: int = 0, at: datetime = NOW):
    return evaluate_certificate(prev, o, now=at, expiry_threshold_days=days)


def test_valid_certificate_is_ok_with_meta() -> None:
    tr = ev(CheckState(status=PENDING), valid())
    assert tr.state.status == OK and tr.state.error is None
    assert tr.outcome is Outcome.OK
    assert tr.meta == {
        "issuer": "Test CA", "signature_algorithm": "sha256WithRSAEncryption",
        "is_self_signed": False, "valid_from": "2026-01-01 00:00:00",
        "valid_to": "2026-04-30 12:00:00",
    }
    assert not tr.events and tr.durable is False


def test_not_down_invalid_goes_down_with_certificate_invalid() -> None:
    for status in (PENDING, OK):
        tr = ev(CheckState(status=status), invalid("self-signed certificate"))
        assert tr.state.status == DOWN and tr.state.error == "self-signed certificate"
        [e] = tr.events
        assert e.event == payloads.CERTIFICATE_INVALID and e.opens_incident
        assert e.fields == {"last_check_at": NOW, "error": "self-signed certificate"}
        assert payloads.certificate_invalid(MONITOR, **e.fields)
        assert tr.durable is True


def test_down_invalid_stays_down_with_updated_error_and_no_event() -> None:
    prev = CheckState(status=DOWN, error="certificate expired", incident_event_id=41)
    tr = ev(prev, invalid("host name mismatch"))
    assert tr.state.status == DOWN and tr.state.error == "host name mismatch"
    assert tr.state.incident_event_id == 41
    assert not tr.events and tr.durable is False


def test_down_valid_recovers_with_parent_of_the_invalid_event() -> None:
    prev = CheckState(status=DOWN, error="certificate expired", incident_event_id=41)
    tr = ev(prev, valid())
    assert tr.state.status == OK and tr.state.incident_event_id is None
    [e] = tr.events
    assert e.event == payloads.CERTIFICATE_RECOVERED and e.parent_id == 41
    body = payloads.certificate_recovered(MONITOR, **e.fields)
    assert b'"valid_from":"2026-01-01 00:00:00"' in body
    assert tr.durable is True


def test_renewal_due_once_per_valid_to_when_fewer_days_remain() -> None:
    expiring = valid(NOW + timedelta(days=9, hours=3))
    tr = ev(CheckState(status=OK), expiring, days=10)
    [e] = tr.events
    assert e.event == payloads.CERTIFICATE_RENEWAL_DUE and not e.opens_incident
    assert e.fields["expires_in_days"] == 9
    assert payloads.certificate_renewal_due(MONITOR, **e.fields)
    assert tr.state.renewal_notified_for == expiring.valid_to and tr.durable
    # Once per certificate: the next probe of the same certificate sends nothing.
    again = ev(tr.state, expiring, days=10, at=NOW + timedelta(hours=1))
    assert not again.events and again.durable is False
    assert again.state.renewal_notified_for == expiring.valid_to
    # A renewed certificate that is again close to expiry gets its own reminder.
    renewed = valid(NOW + timedelta(days=5))
    third = ev(again.state, renewed, days=10)
    assert [x.event for x in third.events] == [payloads.CERTIFICATE_RENEWAL_DUE]


def test_no_renewal_without_threshold_or_with_enough_days() -> None:
    assert not ev(CheckState(status=OK), valid(NOW + timedelta(days=3)), days=0).events
    assert not ev(CheckState(status=OK), valid(NOW + timedelta(days=10)), days=10).events
    assert ev(CheckState(status=OK), valid(NOW + timedelta(days=10) - timedelta(seconds=1)),
              days=10).events


def test_renewal_memory_survives_an_invalid_spell() -> None:
    expiring = valid(NOW + timedelta(days=2))
    first = ev(CheckState(status=OK), expiring, days=10)
    bad = ev(first.state, invalid())
    assert bad.state.renewal_notified_for == expiring.valid_to
    bad.state.incident_event_id = 50
    back = ev(bad.state, expiring, days=10)
    # down | valid: recovered only (the table's row), and no second renewal for it later.
    assert [x.event for x in back.events] == [payloads.CERTIFICATE_RECOVERED]
    later = ev(back.state, expiring, days=10)
    assert not later.events
