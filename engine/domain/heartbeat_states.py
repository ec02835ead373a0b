"""The heartbeat state machine: (state, verdict, now) -> transition. Pure.

The verdict is :func:`engine.domain.heartbeat.verdict`'s: None (up) or the reason it is
down. There is no second-region confirmation (there is nothing to probe again: the pings
are the evidence), so a heartbeat goes from up to down in one step and alerts then.

| state | verdict | next | effects |
|---|---|---|---|
| pending, never pinged | up | pending | - |
| pending/ok | up | ok | - |
| pending/ok/failing | down, in a maintenance window | failing (failing_since) | - |
| pending/ok/failing | down | down | outage opened (from failing_since or now), downtime |
| down | down | down | error updated; a recovery being counted relapses |
| down | up, recovery not confirmed, or in a window | down (recovering_since) | - |
| down | up, recovery confirmed | ok | outage closed; uptime_restored |
| failing | up | ok | nothing sent (no alert went out) |
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from engine.domain import payloads
from engine.domain.evaluate import (
    DOWN,
    FAILING,
    OK,
    PENDING,
    CheckState,
    EventSpec,
    OutageOpen,
    Outcome,
    Transition,
    recovering_error,
)

HEARTBEAT: Final = "heartbeat"


def _state(prev: CheckState, status: str, error: str | None, now: datetime) -> CheckState:
    return CheckState(
        status=status, error=error, last_check_at=now, failing_since=prev.failing_since,
        detected_by=prev.detected_by, verified_via=prev.verified_via,
        outage_id=prev.outage_id, incident_event_id=prev.incident_event_id,
        recovering_since=prev.recovering_since,
    )


def _waited(now: datetime, start: datetime, resumed_at: datetime | None) -> float:
    if resumed_at is not None and resumed_at > start:
        start = resumed_at
    return (now - start).total_seconds()


def evaluate_heartbeat(
    prev: CheckState,
    reason: str | None,
    *,
    now: datetime,
    pinged: bool,
    region: str,
    recovery: float = 0.0,
    muted_until: datetime | None = None,
    resumed_at: datetime | None = None,
) -> Transition:
    """The transition for ``reason`` (see the module table). ``pinged``: the heartbeat has
    had a ping; ``recovery``: seconds up before a down heartbeat is restored (scaled)."""
    meta: dict[str, object] = {}
    if reason is None:
        if prev.status == DOWN:
            since = prev.recovering_since or now
            if muted_until is not None or _waited(now, since, resumed_at) < recovery:
                new = _state(prev, DOWN, recovering_error(since), now)
                new.recovering_since = since
                return Transition(new, meta, Outcome.OK,
                                  durable=prev.recovering_since != since)
            new = CheckState(status=OK, last_check_at=now)
            tr = Transition(new, meta, Outcome.OK, close_outage_id=prev.outage_id, durable=True)
            if prev.incident_event_id is not None:
                tr.events.append(EventSpec(
                    payloads.UPTIME_RESTORED,
                    {"name": HEARTBEAT, "last_check_at": now, "http_status_code": 0,
                     "downtime_seconds": max(0.0, (now - (prev.failing_since or now))
                                             .total_seconds())},
                    parent_id=prev.incident_event_id,
                ))
            return tr
        if prev.status == PENDING and not pinged:
            return Transition(CheckState(status=PENDING, last_check_at=now), meta, Outcome.OK)
        new = CheckState(status=OK, last_check_at=now)
        return Transition(new, meta, Outcome.OK, close_outage_id=prev.outage_id,
                          durable=prev.status == FAILING or prev.outage_id is not None)
    if prev.status == DOWN:
        new = _state(prev, DOWN, reason, now)
        new.recovering_since = None
        return Transition(new, meta, Outcome.FAILURE, durable=prev.recovering_since is not None)
    since = prev.failing_since or now
    if muted_until is not None:
        new = _state(prev, FAILING, reason, now)
        new.failing_since = since
        new.detected_by = region
        return Transition(new, meta, Outcome.FAILURE, durable=prev.failing_since is None)
    new = _state(prev, DOWN, reason, now)
    new.failing_since = since
    new.detected_by = region
    new.verified_via = region
    new.recovering_since = None
    event = EventSpec(
        payloads.DOWNTIME,
        {"name": HEARTBEAT, "last_check_at": now, "error": reason, "http_status_code": None,
         "detected_by": region, "verified_via": region},
        opens_incident=True,
    )
    return Transition(
        new, meta, Outcome.FAILURE,
        open_outage=OutageOpen(since, None, reason, region, region),
        alert_outage=True, events=[event], durable=True,
    )
