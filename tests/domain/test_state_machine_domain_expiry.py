"""The domain expiry state machine, row by row of engine/domain/domain_expiry.py (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson

from engine.domain import events, payloads
from engine.domain.domain_expiry import (
    DEGRADED,
    UNSUPPORTED,
    DomainOutcome,
    evaluate_domain,
)
from engine.domain.evaluate import DOWN, OK, PENDING, CheckState, Outcome, Transition
from engine.domain.rdap import Registration

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
EXPIRES = datetime(2026, 6, 1, 0, 0, 0, tzinfo=UTC)
MONITOR = payloads.MonitorRef(3, "https://www.example.com/", "example")


def answer(expires: datetime | None = EXPIRES, statuses: tuple[str, ...] = ("ok",)
           ) -> DomainOutcome:
    reg = Registration("Example Registrar, Inc.", expires, statuses, ("ns1.example.net",))
    return DomainOutcome("example.com", reg, 3.0, server="https://rdap.test/",
                         fetched_at=NOW - timedelta(hours=1))


def run(prev: CheckState, outcome: DomainOutcome, at: datetime = NOW,
        thresholds: tuple[int, ...] = (30, 14, 7, 1)) -> Transition:
    return evaluate_domain(prev, outcome, now=at, thresholds=thresholds)


def days_before(days: float) -> datetime:
    return EXPIRES - timedelta(days=days)


def test_registered_domain_far_from_expiry_is_ok_with_meta() -> None:
    tr = run(CheckState(status=PENDING), answer())
    assert tr.state.status == OK and tr.state.error is None and tr.outcome is Outcome.OK
    assert not tr.events
    assert tr.meta == {
        "domain": "example.com", "registrar": "Example Registrar, Inc.",
        "expires_at": "2026-06-01 00:00:00", "days_left": 91, "statuses": ["ok"],
        "nameservers": ["ns1.example.net"], "source": "rdap",
        "rdap_server": "https://rdap.test/", "checked_at": "2026-03-01 11:00:00",
        "warning": None,
    }


def test_renewal_due_once_per_threshold_crossed() -> None:
    state = CheckState(status=OK)
    sent: list[int] = []
    # Every six hours from 40 days before expiry to 12 hours before it.
    at = days_before(40)
    while at < EXPIRES - timedelta(hours=12):
        tr = run(state, answer(), at=at)
        assert tr.state.status == OK
        for e in tr.events:
            assert e.event == events.DOMAIN_RENEWAL_DUE
            sent.append(e.fields["threshold_days"])
        state = tr.state
        at += timedelta(hours=6)
    assert sent == [30, 14, 7, 1]


def test_arriving_late_announces_the_smallest_crossed_threshold_only() -> None:
    tr = run(CheckState(status=PENDING), answer(), at=days_before(5))
    assert [(e.event, e.fields["threshold_days"], e.fields["expires_in_days"])
            for e in tr.events] == [(events.DOMAIN_RENEWAL_DUE, 7, 5)]
    again = run(tr.state, answer(), at=days_before(4))
    assert not again.events
    last = run(again.state, answer(), at=days_before(0.5))
    assert [e.fields["threshold_days"] for e in last.events] == [1]


def test_renewal_rearms_every_threshold() -> None:
    tr = run(CheckState(status=OK), answer(), at=days_before(10))
    assert [e.fields["threshold_days"] for e in tr.events] == [14]
    renewed = answer(expires=EXPIRES + timedelta(days=365))
    after = run(tr.state, renewed, at=days_before(9))
    assert not after.events and after.state.status == OK
    # A year later the next expiry crosses its thresholds again.
    late = run(after.state, renewed, at=EXPIRES + timedelta(days=365 - 20))
    assert [e.fields["threshold_days"] for e in late.events] == [30]


def test_no_thresholds_no_renewal_events() -> None:
    tr = run(CheckState(status=OK), answer(), at=days_before(2), thresholds=())
    assert not tr.events


def test_expired_domain_is_down_once_then_recovers_after_renewal() -> None:
    tr = run(CheckState(status=OK), answer(), at=EXPIRES + timedelta(hours=2))
    assert tr.state.status == DOWN and tr.outcome is Outcome.FAILURE
    assert tr.state.error == "the domain expired on 2026-06-01 00:00:00 UTC"
    assert [e.event for e in tr.events] == [events.DOMAIN_INVALID]
    assert tr.events[0].opens_incident and tr.durable
    body = orjson.loads(payloads.domain_invalid(MONITOR, **tr.events[0].fields))
    assert body["check"] == {
        "name": "domain_expiry", "status": "nok", "last_check_at": "2026-06-01 02:00:00",
        "error": "the domain expired on 2026-06-01 00:00:00 UTC",
        "meta": {"domain": "example.com", "expires_at": "2026-06-01 00:00:00",
                 "statuses": ["ok"]},
    }
    down = CheckState(status=DOWN, error=tr.state.error, incident_event_id=41)
    still = run(down, answer(), at=EXPIRES + timedelta(days=1))
    assert still.state.status == DOWN and not still.events
    renewed = answer(expires=EXPIRES + timedelta(days=365))
    back = run(down, renewed, at=EXPIRES + timedelta(days=2))
    assert back.state.status == OK and back.state.incident_event_id is None
    assert [(e.event, e.parent_id) for e in back.events] == [(events.DOMAIN_RECOVERED, 41)]
    body = orjson.loads(payloads.domain_recovered(MONITOR, **back.events[0].fields))
    assert body["check"]["status"] == "ok"
    assert body["check"]["meta"]["expires_at"] == "2027-06-01 00:00:00"


def test_hold_and_deletion_statuses_are_invalid() -> None:
    for status in ("serverHold", "clientHold", "redemptionPeriod", "pendingDelete"):
        tr = run(CheckState(status=OK), answer(statuses=("clientTransferProhibited", status)))
        assert tr.state.status == DOWN, status
        assert tr.state.error == f"the registry lists the domain as {status}"
        assert [e.event for e in tr.events] == [events.DOMAIN_INVALID]
    locked = run(CheckState(status=OK), answer(statuses=("clientTransferProhibited",)))
    assert locked.state.status == OK


def test_unsupported_tld_is_its_own_state_never_down() -> None:
    o = DomainOutcome("example.zz", None, 0.1,
                      unsupported="the .zz registry publishes no RDAP service")
    tr = run(CheckState(status=PENDING), o)
    assert tr.state.status == UNSUPPORTED and tr.outcome is not Outcome.FAILURE
    assert tr.state.error == "the .zz registry publishes no RDAP service"
    assert not tr.events


def test_no_answer_is_a_warning_not_an_outage() -> None:
    o = DomainOutcome("example.com", None, 10_000.0,
                      error="the RDAP server rdap.test did not answer within 10 s")
    tr = run(CheckState(status=OK), o)
    assert tr.state.status == DEGRADED and not tr.events
    assert tr.state.error == "the RDAP server rdap.test did not answer within 10 s"
    # A failed refresh with an older answer kept judges the kept answer, with a warning.
    kept = DomainOutcome("example.com", answer().registration, 3.0, error="garbage")
    tr2 = run(CheckState(status=OK), kept)
    assert tr2.state.status == OK and tr2.meta["warning"] == "garbage"


def test_renewal_due_payload_shape() -> None:
    tr = run(CheckState(status=OK), answer(), at=days_before(20))
    body = orjson.loads(payloads.domain_renewal_due(MONITOR, **tr.events[0].fields))
    assert body == {
        "check": {"name": "domain_expiry", "status": "ok",
                  "last_check_at": "2026-05-12 00:00:00",
                  "meta": {"expires_in_days": 20, "threshold_days": 30,
                           "registrar": "Example Registrar, Inc.", "domain": "example.com",
                           "expires_at": "2026-06-01 00:00:00"}},
        "monitor": {"id": 3, "url": "https://www.example.com/", "alias": "example"},
    }
