"""The runner's fast path (``steady_class``) agrees with ``evaluate_uptime``
(pure)."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta

from engine.domain.evaluate import (
    DEGRADED,
    DOWN,
    FAILING,
    OK,
    PENDING,
    CheckState,
    Outcome,
    classify,
    evaluate_uptime,
    steady_class,
    uptime_error,
    uptime_meta,
)
from engine.domain.outcomes import HttpOutcome

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EARLIER = NOW - timedelta(minutes=5)
SLOW_MS = 3000.0

OUTCOMES = [
    HttpOutcome(200, None, 12.0, None, 1.0, None, 5.0),
    HttpOutcome(301, None, 12.0, None, 1.0, None, 5.0, redirects=5),
    HttpOutcome(200, None, 4000.0, None, 1.0, None, 5.0),
    HttpOutcome(404, None, 12.0, None, 1.0, None, 5.0),
    HttpOutcome(503, None, 12.0, None, 1.0, None, 5.0),
    HttpOutcome(None, "connection refused", 1.0, None, None, None, None),
    # Class boundaries: exactly the slow threshold, the last 3xx and 4xx, the first 5xx.
    HttpOutcome(200, None, SLOW_MS, None, 1.0, None, 5.0),
    HttpOutcome(399, None, 1.0, None, 1.0, None, 5.0),
    HttpOutcome(499, None, 1.0, None, 1.0, None, 5.0),
    HttpOutcome(500, None, 1.0, None, 1.0, None, 5.0),
]


def _states() -> list[CheckState]:
    out = []
    for status, error, failing, outage, incident, renewal in itertools.product(
        (PENDING, OK, DEGRADED, FAILING, DOWN),
        (None, "HTTP 404"),
        (None, EARLIER),
        (None, 7),
        (None, 9),
        (None, NOW + timedelta(days=30)),
    ):
        out.append(CheckState(
            status=status, error=error, last_check_at=EARLIER, failing_since=failing,
            detected_by="eu" if failing else None, verified_via="us" if outage else None,
            outage_id=outage, incident_event_id=incident, renewal_notified_for=renewal,
        ))
    # Bookkeeping fields one at a time on an ok check (left behind by a disable/enable).
    for field in ("failing_since", "detected_by", "verified_via", "outage_id",
                  "incident_event_id"):
        value = {"failing_since": EARLIER, "outage_id": 3, "incident_event_id": 4}.get(
            field, "eu")
        out.append(dataclasses.replace(CheckState(status=OK), **{field: value}))
    return out


def test_steady_means_only_error_meta_and_last_check_change() -> None:
    steady = 0
    for prev, outcome in itertools.product(_states(), OUTCOMES):
        cls = classify(outcome, SLOW_MS)
        tr = evaluate_uptime(prev, outcome, now=NOW, region="eu", threshold=60.0,
                             slow_threshold_ms=SLOW_MS)
        fast = steady_class(prev, outcome, SLOW_MS)
        if fast is None:
            continue  # the runner evaluates these in full
        assert fast is cls
        steady += 1
        expected = dataclasses.replace(
            prev, error=uptime_error(outcome, cls, SLOW_MS), last_check_at=NOW)
        assert tr.state == expected
        assert tr.outcome is cls
        assert tr.meta == uptime_meta(outcome)
        assert not tr.durable and not tr.confirm and not tr.events
        assert tr.open_outage is None and tr.close_outage_id is None and not tr.alert_outage
    assert steady > 0


def test_ok_stays_ok_is_steady_and_failure_never_is() -> None:
    ok, degraded, failure = OUTCOMES[0], OUTCOMES[3], OUTCOMES[5]
    assert steady_class(CheckState(status=OK), ok, SLOW_MS) is Outcome.OK
    assert steady_class(CheckState(status=DEGRADED), degraded, SLOW_MS) is Outcome.DEGRADED
    assert steady_class(CheckState(status=OK), degraded, SLOW_MS) is None
    assert steady_class(CheckState(status=PENDING), ok, SLOW_MS) is None
    assert steady_class(CheckState(status=OK), failure, SLOW_MS) is None
