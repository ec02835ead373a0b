"""The uptime state machine, row by row of docs/design.md (pure: no database, no clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.domain import payloads
from engine.domain.evaluate import (
    DEGRADED,
    DOWN,
    FAILING,
    OK,
    PENDING,
    CheckState,
    Outcome,
    classify,
    evaluate_confirmation,
    evaluate_uptime,
    threshold_due,
    uptime_error,
)
from engine.domain.outcomes import HttpOutcome

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SLOW = 3000.0


def resp(code: int = 200, ms: float = 50.0) -> HttpOutcome:
    return HttpOutcome(code, None, ms, 1.0, 1.0, None, 10.0)


def fail(error: str = "connection refused") -> HttpOutcome:
    return HttpOutcome(None, error, 5.0, 1.0, None, None, None)


def up(prev: CheckState, o: HttpOutcome, at: datetime = T0, threshold: float = 0.0):
    return evaluate_uptime(prev, o, now=at, region="eu", threshold=threshold,
                           slow_threshold_ms=SLOW)


def conf(prev: CheckState, o: HttpOutcome, at: datetime = T0, threshold: float = 0.0,
         via: str = "us"):
    return evaluate_confirmation(prev, o, now=at, verified_via=via, threshold=threshold,
                                 slow_threshold_ms=SLOW)


def failing(confirmed: bool, since: datetime = T0) -> CheckState:
    return CheckState(status=FAILING, error="connection refused", last_check_at=since,
                      failing_since=since, detected_by="eu",
                      verified_via="us" if confirmed else None,
                      outage_id=7 if confirmed else None)


def down(since: datetime = T0) -> CheckState:
    return CheckState(status=DOWN, error="connection refused", last_check_at=since,
                      failing_since=since, detected_by="eu", verified_via="us", outage_id=7,
                      incident_event_id=99)


# -- classification (decisions.md) -------------------------------------------------------------

@pytest.mark.parametrize(
    ("outcome", "expected", "error"),
    [
        (resp(200), Outcome.OK, None),
        (resp(204), Outcome.OK, None),
        (resp(301), Outcome.OK, None),
        (resp(399), Outcome.OK, None),
        (resp(200, ms=3000.0), Outcome.OK, None),  # "within" the threshold includes it
        (resp(200, ms=3000.5), Outcome.DEGRADED, "slow response: 3000 ms (threshold 3000 ms)"),
        (resp(404), Outcome.DEGRADED, "HTTP 404"),
        (resp(499), Outcome.DEGRADED, "HTTP 499"),
        (resp(500), Outcome.FAILURE, "HTTP 500"),
        (resp(503, ms=9000), Outcome.FAILURE, "HTTP 503"),
        (fail("timed out after 10 s"), Outcome.FAILURE, "timed out after 10 s"),
        # A probe of another scheme (tcp, dns, ...): no status code, no error = it answered.
        (HttpOutcome(None, None, 1.0, None, None, None, None), Outcome.OK, None),
        (HttpOutcome(None, None, 3000.5, None, None, None, None), Outcome.DEGRADED,
         "slow response: 3000 ms (threshold 3000 ms)"),
        (HttpOutcome(None, None, 1.0, None, None, None, None,
                     assertion_error="answer was 10.0.0.1, expected 192.0.2.1"),
         Outcome.FAILURE, "answer was 10.0.0.1, expected 192.0.2.1"),
        (HttpOutcome(None, "connection refused", 1.0, None, None, None, None,
                     details={"port": 25}), Outcome.FAILURE, "connection refused"),
    ],
)
def test_classification_and_error_words(outcome: HttpOutcome, expected: Outcome,
                                        error: str | None) -> None:
    assert classify(outcome, SLOW) is expected
    assert uptime_error(outcome, expected, SLOW) == error


# -- any not failing/down | ok/degraded -> ok/degraded ----------------------------------------

@pytest.mark.parametrize("status", [PENDING, OK, DEGRADED])
@pytest.mark.parametrize(("outcome", "new", "error"), [
    (resp(200), OK, None), (resp(404), DEGRADED, "HTTP 404"),
    (resp(200, ms=5000), DEGRADED, "slow response: 5000 ms (threshold 3000 ms)"),
])
def test_healthy_states_follow_the_outcome_without_effects(status: str, outcome: HttpOutcome,
                                                           new: str, error: str | None) -> None:
    tr = up(CheckState(status=status), outcome)
    assert tr.state.status == new
    assert tr.state.error == error
    assert tr.state.last_check_at == T0
    assert tr.meta == {"http_status_code": outcome.status_code}
    assert not tr.events and not tr.confirm and tr.open_outage is None
    assert tr.close_outage_id is None
    # Only status/error/meta/last_check_at change: the runner may batch the write.
    assert tr.durable is False


# -- pending/ok/degraded | failure -> failing, ask for confirmation ---------------------------

@pytest.mark.parametrize("status", [PENDING, OK, DEGRADED])
@pytest.mark.parametrize("outcome", [fail(), resp(502)])
def test_first_failure_starts_an_unconfirmed_episode(status: str, outcome: HttpOutcome) -> None:
    tr = up(CheckState(status=status), outcome)
    s = tr.state
    assert s.status == FAILING
    assert s.failing_since == T0 and s.detected_by == "eu"
    assert s.outage_id is None and not s.confirmed
    assert tr.confirm is True and tr.durable is True
    assert not tr.events and tr.open_outage is None
    assert tr.outcome is Outcome.FAILURE


# -- failing, unconfirmed | confirmation ok/degraded -> ok/degraded, nothing sent -------------

@pytest.mark.parametrize(("outcome", "new"), [(resp(200), OK), (resp(404), DEGRADED)])
def test_confirmation_success_returns_to_health_silently(outcome: HttpOutcome, new: str) -> None:
    tr = conf(failing(confirmed=False), outcome, T0 + timedelta(seconds=1))
    s = tr.state
    assert s.status == new
    assert s.failing_since is None and s.detected_by is None and s.outage_id is None
    assert not tr.events and tr.open_outage is None and tr.close_outage_id is None
    assert tr.durable is True


# -- failing, unconfirmed | confirmation failure -> confirmed (or down past threshold) --------

def test_confirmed_failure_with_zero_threshold_goes_down_and_alerts() -> None:
    at = T0 + timedelta(seconds=1)
    tr = conf(failing(confirmed=False), resp(503), at, threshold=0.0)
    s = tr.state
    assert s.status == DOWN
    assert tr.open_outage is not None
    assert tr.open_outage.started_at == T0  # the first failed probe
    assert tr.open_outage.detected_by == "eu" and tr.open_outage.verified_via == "us"
    assert tr.open_outage.http_status_code == 503
    assert tr.alert_outage is True
    [ev] = tr.events
    assert ev.event == payloads.DOWNTIME and ev.opens_incident and ev.parent_id is None
    assert ev.fields == {"last_check_at": at, "error": "HTTP 503", "http_status_code": 503,
                         "detected_by": "eu", "verified_via": "us"}
    # The payload builder accepts exactly these fields.
    body = payloads.downtime(payloads.MonitorRef(1, "https://x/", "x"), **ev.fields)
    assert b'"detected_by":"eu"' in body


def test_confirmed_failure_within_threshold_waits_as_failing() -> None:
    at = T0 + timedelta(seconds=1)
    tr = conf(failing(confirmed=False), fail(), at, threshold=60.0)
    assert tr.state.status == FAILING
    assert tr.open_outage is not None and tr.alert_outage is False
    assert tr.state.verified_via == "us"
    assert not tr.events
    assert tr.durable is True
    # The runner re-probes when the threshold expires.
    tr.state.outage_id = 7
    assert threshold_due(tr.state, 60.0) == T0 + timedelta(seconds=60)


def test_threshold_due_only_while_confirmed_failing() -> None:
    assert threshold_due(failing(confirmed=False), 60.0) is None
    assert threshold_due(down(), 60.0) is None
    assert threshold_due(CheckState(status=OK), 60.0) is None


# -- failing, confirmed | failure -> down once threshold -----------------------------------------

def test_confirmed_failing_stays_failing_before_threshold() -> None:
    tr = up(failing(confirmed=True), fail("timed out after 10 s"),
            T0 + timedelta(seconds=59), threshold=60.0)
    assert tr.state.status == FAILING and tr.state.error == "timed out after 10 s"
    assert not tr.events and not tr.confirm and tr.durable is False
    assert tr.state.outage_id == 7 and tr.state.failing_since == T0


def test_confirmed_failing_goes_down_when_threshold_reached() -> None:
    at = T0 + timedelta(seconds=60)
    tr = up(failing(confirmed=True), fail(), at, threshold=60.0)
    assert tr.state.status == DOWN
    assert tr.alert_outage is True and tr.open_outage is None
    [ev] = tr.events
    assert ev.event == payloads.DOWNTIME and ev.opens_incident
    assert ev.fields["verified_via"] == "us" and ev.fields["detected_by"] == "eu"
    assert ev.fields["http_status_code"] is None  # the builder sends 0
    assert tr.durable is True


# -- failing, confirmed | ok/degraded -> ok/degraded, outage closed, nothing sent -------------

@pytest.mark.parametrize(("outcome", "new"), [(resp(200), OK), (resp(404), DEGRADED)])
def test_recovery_before_alert_closes_the_outage_silently(outcome: HttpOutcome, new: str) -> None:
    tr = up(failing(confirmed=True), outcome, T0 + timedelta(seconds=30), threshold=60.0)
    assert tr.state.status == new
    assert tr.close_outage_id == 7
    assert not tr.events
    assert tr.state.outage_id is None and tr.state.failing_since is None


# -- failing, unconfirmed | ordinary probe (a restart between probe and confirmation) --------

def test_unconfirmed_failing_asks_for_confirmation_again() -> None:
    tr = up(failing(confirmed=False), fail(), T0 + timedelta(seconds=30))
    assert tr.state.status == FAILING and tr.confirm is True
    assert tr.state.failing_since == T0  # the episode keeps its first failure
    assert not tr.events


def test_unconfirmed_failing_recovers_on_an_ordinary_probe() -> None:
    tr = up(failing(confirmed=False), resp(200), T0 + timedelta(seconds=30))
    assert tr.state.status == OK and tr.close_outage_id is None and not tr.events


# -- down | failure -> down, error updated -----------------------------------------------------

def test_down_stays_down_and_updates_the_error() -> None:
    tr = up(down(), resp(500), T0 + timedelta(minutes=5))
    assert tr.state.status == DOWN and tr.state.error == "HTTP 500"
    assert tr.state.incident_event_id == 99 and tr.state.outage_id == 7
    assert not tr.events and tr.durable is False and not tr.confirm


# -- down | ok/degraded -> ok/degraded, outage closed, uptime_restored ------------------------

@pytest.mark.parametrize(("outcome", "new"), [(resp(200), OK), (resp(404), DEGRADED)])
def test_recovery_after_alert_sends_uptime_restored(outcome: HttpOutcome, new: str) -> None:
    at = T0 + timedelta(hours=27, minutes=3, seconds=9)
    tr = up(down(), outcome, at)
    assert tr.state.status == new
    assert tr.close_outage_id == 7
    assert tr.state.incident_event_id is None and tr.state.outage_id is None
    [ev] = tr.events
    assert ev.event == payloads.UPTIME_RESTORED
    assert ev.parent_id == 99 and not ev.opens_incident
    assert ev.fields["downtime_seconds"] == (at - T0).total_seconds()
    body = payloads.uptime_restored(payloads.MonitorRef(1, "https://x/", "x"), **ev.fields)
    assert b'"downtime":"27:03:09"' in body
    assert f'"http_status_code":{outcome.status_code}'.encode() in body


def test_leftover_outage_of_a_disable_cycle_is_closed_on_the_next_probe() -> None:
    prev = CheckState(status=PENDING, outage_id=5, failing_since=T0, detected_by="eu")
    tr = up(prev, resp(200))
    assert tr.state.status == OK and tr.close_outage_id == 5 and tr.durable
    assert tr.state.outage_id is None and not tr.events


def test_confirmation_of_a_state_that_moved_on_is_an_ordinary_probe() -> None:
    tr = conf(down(), resp(200))
    assert tr.state.status == OK
    assert [e.event for e in tr.events] == [payloads.UPTIME_RESTORED]
