"""The heartbeat state machine, pure: one step from up to down with its downtime event (no
confirmation), recovery with its threshold, and a maintenance window holding the alert."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.domain.evaluate import DOWN, FAILING, OK, PENDING, CheckState
from engine.domain.heartbeat_states import evaluate_heartbeat

T0 = datetime(2026, 11, 27, 4, 0, tzinfo=UTC)


def test_pending_stays_pending_until_the_first_ping() -> None:
    tr = evaluate_heartbeat(CheckState(), None, now=T0, pinged=False, region="eu")
    assert tr.state.status == PENDING and not tr.events
    tr = evaluate_heartbeat(CheckState(), None, now=T0, pinged=True, region="eu")
    assert tr.state.status == OK and not tr.events


def test_down_in_one_step_with_an_outage_and_a_downtime_named_heartbeat() -> None:
    tr = evaluate_heartbeat(CheckState(status=OK), "exit status 2", now=T0, pinged=True,
                            region="eu")
    assert tr.state.status == DOWN and tr.state.error == "exit status 2"
    assert not tr.confirm and tr.alert_outage and tr.open_outage is not None
    [ev] = tr.events
    assert ev.event == "downtime" and ev.opens_incident
    assert ev.fields["name"] == "heartbeat" and ev.fields["detected_by"] == "eu"


def test_down_stays_down_and_the_next_good_ping_restores_after_the_threshold() -> None:
    down = CheckState(status=DOWN, error="x", failing_since=T0, outage_id=5,
                      incident_event_id=9)
    tr = evaluate_heartbeat(down, "y", now=T0 + timedelta(minutes=1), pinged=True, region="eu")
    assert tr.state.status == DOWN and tr.state.error == "y" and not tr.events
    t1 = T0 + timedelta(minutes=5)
    waiting = evaluate_heartbeat(down, None, now=t1, pinged=True, region="eu", recovery=60)
    assert waiting.state.status == DOWN and waiting.state.recovering_since == t1
    tr = evaluate_heartbeat(waiting.state, None, now=t1 + timedelta(seconds=60), pinged=True,
                            region="eu", recovery=60)
    assert tr.state.status == OK and tr.close_outage_id == 5
    [ev] = tr.events
    assert ev.event == "uptime_restored" and ev.parent_id == 9
    assert ev.fields["downtime_seconds"] == 360.0


def test_a_maintenance_window_holds_the_alert_until_it_ends() -> None:
    end = T0 + timedelta(minutes=30)
    tr = evaluate_heartbeat(CheckState(status=OK), "exit status 1", now=T0, pinged=True,
                            region="eu", muted_until=end)
    assert tr.state.status == FAILING and tr.state.failing_since == T0 and not tr.events
    tr = evaluate_heartbeat(tr.state, "exit status 1", now=end, pinged=True, region="eu")
    assert tr.state.status == DOWN and tr.open_outage is not None
    assert tr.open_outage.started_at == T0
    # A good ping inside the window ends it with nothing sent.
    held = evaluate_heartbeat(CheckState(status=FAILING, failing_since=T0), None, now=T0,
                              pinged=True, region="eu")
    assert held.state.status == OK and not held.events
