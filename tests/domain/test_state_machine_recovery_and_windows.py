"""The uptime state machine with a recovery threshold and maintenance windows (pure: no
database, no clock): docs/design.md, "Confirmed recovery" and "Maintenance windows"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.domain import payloads
from engine.domain.evaluate import (
    DOWN,
    FAILING,
    OK,
    CheckState,
    decision_due,
    evaluate_confirmation,
    evaluate_uptime,
)
from engine.domain.outcomes import HttpOutcome

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SLOW = 3000.0


def s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def good() -> HttpOutcome:
    return HttpOutcome(200, None, 50.0, 1.0, 1.0, None, 10.0)


def bad() -> HttpOutcome:
    return HttpOutcome(None, "connection refused", 5.0, 1.0, None, None, None)


def down() -> CheckState:
    return CheckState(status=DOWN, error="connection refused", last_check_at=T0,
                      failing_since=T0, detected_by="eu", verified_via="eu", outage_id=7,
                      incident_event_id=99)


def up(prev: CheckState, o: HttpOutcome, at: datetime, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("threshold", 0.0)
    return evaluate_uptime(prev, o, now=at, region="eu", slow_threshold_ms=SLOW, **kw)


# -- confirmed recovery ---------------------------------------------------------------------


def test_without_a_recovery_threshold_the_first_good_probe_restores() -> None:
    tr = up(down(), good(), s(60))
    assert tr.state.status == OK and tr.close_outage_id == 7
    [ev] = tr.events
    assert ev.event == payloads.UPTIME_RESTORED and ev.parent_id == 99


def test_good_probes_wait_for_the_recovery_threshold_before_the_restore() -> None:
    first = up(down(), good(), s(60), recovery=30.0)
    assert first.state.status == DOWN and first.events == [] and first.close_outage_id is None
    assert first.state.recovering_since == s(60) and first.durable
    assert first.state.error is not None and "recovery not confirmed" in first.state.error
    # Still inside the threshold: nothing new to write but status and time.
    second = up(first.state, good(), s(75), recovery=30.0)
    assert second.state.status == DOWN and second.events == [] and not second.durable
    assert decision_due(second.state, 0.0, 30.0, None, None) == s(90)
    done = up(second.state, good(), s(90), recovery=30.0)
    assert done.state.status == OK and done.close_outage_id == 7
    [ev] = done.events
    assert ev.event == payloads.UPTIME_RESTORED and ev.parent_id == 99
    # The outage counts until the recovery is confirmed.
    assert ev.fields["downtime_seconds"] == 90.0
    assert done.state.recovering_since is None


def test_a_relapse_keeps_the_one_outage_and_restarts_the_count() -> None:
    rec = up(down(), good(), s(60), recovery=30.0).state
    relapse = up(rec, bad(), s(70), recovery=30.0)
    assert relapse.state.status == DOWN and relapse.events == [] and relapse.durable
    assert relapse.state.recovering_since is None and relapse.state.outage_id == 7
    assert relapse.close_outage_id is None and relapse.open_outage is None
    again = up(relapse.state, good(), s(80), recovery=30.0)
    assert again.state.recovering_since == s(80) and again.events == []
    assert up(again.state, good(), s(100), recovery=30.0).events == []
    [ev] = up(again.state, good(), s(110), recovery=30.0).events
    assert ev.event == payloads.UPTIME_RESTORED and ev.parent_id == 99


# -- maintenance windows --------------------------------------------------------------------


def confirmed_failing(since: datetime) -> CheckState:
    return CheckState(status=FAILING, error="connection refused", last_check_at=since,
                      failing_since=since, detected_by="eu", verified_via="eu", outage_id=7)


def test_no_downtime_during_a_window_and_the_outage_is_judged_afresh_after_it() -> None:
    end = s(600)
    unconfirmed = CheckState(status=FAILING, error="x", last_check_at=T0, failing_since=T0,
                             detected_by="eu")
    opened = evaluate_confirmation(unconfirmed, bad(), now=s(1), verified_via="eu",
                                   threshold=0.0, slow_threshold_ms=SLOW, muted_until=end)
    assert opened.open_outage is not None and opened.events == []
    assert opened.state.status == FAILING
    during = up(confirmed_failing(T0), bad(), s(300), muted_until=end)
    assert during.state.status == FAILING and during.events == []
    # The next decision is due at the window's end plus the threshold, not in the past.
    assert decision_due(during.state, 60.0, 0.0, end, None) == s(660)
    # After the window: the threshold counts from its end.
    early = up(confirmed_failing(T0), bad(), s(630), threshold=60.0, resumed_at=end)
    assert early.state.status == FAILING and early.events == []
    late = up(confirmed_failing(T0), bad(), s(660), threshold=60.0, resumed_at=end)
    assert late.state.status == DOWN
    [ev] = late.events
    assert ev.event == payloads.DOWNTIME
    # A window that ended before the outage began changes nothing.
    fresh = up(confirmed_failing(s(700)), bad(), s(760), threshold=60.0, resumed_at=end)
    assert fresh.state.status == DOWN


def test_a_recovery_during_a_window_is_restored_after_it() -> None:
    end = s(600)
    during = up(down(), good(), s(300), muted_until=end)
    assert during.state.status == DOWN and during.events == []
    assert during.close_outage_id is None
    after = up(during.state, good(), s(601), resumed_at=end)
    assert after.state.status == OK
    [ev] = after.events
    assert ev.event == payloads.UPTIME_RESTORED and ev.parent_id == 99
    # With a recovery threshold, it counts from the window's end.
    held = up(during.state, good(), s(601), recovery=30.0, resumed_at=end)
    assert held.state.status == DOWN and held.events == []
    assert [e.event for e in up(held.state, good(), s(630), recovery=30.0,
                                resumed_at=end).events] == [payloads.UPTIME_RESTORED]


def test_probes_in_a_window_still_move_the_state() -> None:
    ok = CheckState(status=OK, last_check_at=T0)
    tr = up(ok, bad(), s(30), muted_until=s(600))
    assert tr.state.status == FAILING and tr.confirm
