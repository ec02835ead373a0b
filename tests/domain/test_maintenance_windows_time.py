"""Maintenance windows as time (engine/domain/maintenance.py; pure, ``now`` passed in):
one-off and weekly windows, daylight-saving changes, merged runs, the seconds statistics
take out of uptime."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from engine.domain.maintenance import (
    Window,
    merged,
    next_span,
    notices,
    overlap_seconds,
    quiet,
    seconds_within,
    spans_of,
)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def weekly(weekday: int, at: time, minutes: int, zone: str, wid: int = 1) -> Window:
    return Window(id=wid, reason="patching", monitor_ids=None, weekday=weekday,
                  start_time=at, duration_s=minutes * 60, time_zone=zone)


def test_weekly_window_follows_the_local_clock_across_spring_forward() -> None:
    # Sunday 02:00-04:00 Europe/Berlin. 2026-03-29 is the spring-forward Sunday (02:00 CET
    # becomes 03:00 CEST): 02:00 local does not exist that day and is read as 01:00 UTC.
    w = weekly(6, time(2, 0), 120, "Europe/Berlin")
    spans = w.spans(utc(2026, 3, 20), utc(2026, 4, 6))
    assert spans == [
        (utc(2026, 3, 22, 1, 0), utc(2026, 3, 22, 3, 0)),   # CET, UTC+1
        (utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 3, 0)),   # the gap day
        (utc(2026, 4, 5, 0, 0), utc(2026, 4, 5, 2, 0)),     # CEST, UTC+2
    ]


def test_weekly_window_across_fall_back_and_in_new_york() -> None:
    # 01:30 America/New_York on Sundays; 2026-11-01 01:30 happens twice: the first (EDT).
    w = weekly(6, time(1, 30), 60, "America/New_York")
    spans = w.spans(utc(2026, 10, 24), utc(2026, 11, 10))
    assert spans == [
        (utc(2026, 10, 25, 5, 30), utc(2026, 10, 25, 6, 30)),  # EDT, UTC-4
        (utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6, 30)),    # first 01:30, EDT
        (utc(2026, 11, 8, 6, 30), utc(2026, 11, 8, 7, 30)),    # EST, UTC-5
    ]
    # A 3-hour window over the fall-back hour lasts 3 hours of elapsed time.
    long = weekly(6, time(0, 30), 180, "America/New_York")
    [(b, e)] = long.spans(utc(2026, 11, 1), utc(2026, 11, 2))
    assert e - b == timedelta(hours=3)


def test_quiet_gives_the_end_of_a_run_and_the_last_end() -> None:
    a = Window(id=1, reason="", monitor_ids=None, starts_at=utc(2026, 5, 1, 10),
               ends_at=utc(2026, 5, 1, 11))
    b = Window(id=2, reason="", monitor_ids=None, starts_at=utc(2026, 5, 1, 11),
               ends_at=utc(2026, 5, 1, 12))
    assert quiet([a, b], utc(2026, 5, 1, 9)) == (None, None)
    assert quiet([a, b], utc(2026, 5, 1, 10, 30)) == (utc(2026, 5, 1, 12), None)
    assert quiet([a, b], utc(2026, 5, 1, 12)) == (None, utc(2026, 5, 1, 12))
    assert quiet([], utc(2026, 5, 1, 12)) == (None, None)


def test_weekly_quiet_and_next_span() -> None:
    w = weekly(0, time(23, 0), 120, "UTC")  # Monday 23:00 to Tuesday 01:00
    # On, and last week's occurrence is the last one that ended.
    assert quiet([w], utc(2026, 6, 2, 0, 30)) == (utc(2026, 6, 2, 1), utc(2026, 5, 26, 1))
    assert quiet([w], utc(2026, 6, 2, 1, 0))[1] == utc(2026, 6, 2, 1)
    assert next_span(w, utc(2026, 6, 3)) == (utc(2026, 6, 8, 23), utc(2026, 6, 9, 1))


def test_seconds_in_the_statistics_window() -> None:
    w = weekly(2, time(12, 0), 60, "UTC")  # Wednesdays 12:00-13:00
    start, end = utc(2026, 6, 1), utc(2026, 7, 1)
    spans = spans_of([w], start, end)
    assert len(spans) == 4  # June 2026 has four Wednesdays
    assert seconds_within(spans, start, end) == 4 * 3600
    outage = [(utc(2026, 6, 3, 12, 30), utc(2026, 6, 3, 14, 0))]
    assert overlap_seconds(outage, spans) == 1800
    assert merged([(utc(2026, 1, 1, 1), utc(2026, 1, 1, 3)),
                   (utc(2026, 1, 1, 2), utc(2026, 1, 1, 4))]) == [
        (utc(2026, 1, 1, 1), utc(2026, 1, 1, 4))]


def test_notices_list_current_and_upcoming_windows() -> None:
    now = utc(2026, 6, 1, 12)
    past = Window(id=1, reason="old", monitor_ids=None, starts_at=utc(2026, 5, 1),
                  ends_at=utc(2026, 5, 2))
    soon = Window(id=2, reason="db upgrade", monitor_ids=None, starts_at=utc(2026, 6, 2),
                  ends_at=utc(2026, 6, 2, 2))
    on = Window(id=3, reason="now", monitor_ids=(5,), starts_at=utc(2026, 6, 1, 11),
                ends_at=utc(2026, 6, 1, 13))
    got = notices([past, soon, on], now, timedelta(days=7))
    assert [(w.id, span) for w, span in got] == [
        (3, (utc(2026, 6, 1, 11), utc(2026, 6, 1, 13))),
        (2, (utc(2026, 6, 2), utc(2026, 6, 2, 2))),
    ]


def test_a_window_counts_from_its_creation_on() -> None:
    created = utc(2026, 6, 10, 12, 30)  # in the middle of the second occurrence
    w = Window(id=1, reason="", monitor_ids=None, weekday=2, start_time=time(12, 0),
               duration_s=3600, time_zone="UTC", created_at=created)
    start, end = utc(2026, 6, 1), utc(2026, 7, 1)
    assert w.spans(start, end) == [
        (created, utc(2026, 6, 10, 13)),
        (utc(2026, 6, 17, 12), utc(2026, 6, 17, 13)),
        (utc(2026, 6, 24, 12), utc(2026, 6, 24, 13)),
    ]
    assert len(w.declared_spans(start, end)) == 4  # what the API shows
    # Before its creation nothing is muted and nothing "ended".
    assert quiet([w], utc(2026, 6, 10, 12, 15)) == (None, None)
    assert quiet([w], utc(2026, 6, 10, 12, 45)) == (utc(2026, 6, 10, 13), None)
    past = Window(id=2, reason="", monitor_ids=None, starts_at=utc(2026, 6, 1),
                  ends_at=utc(2026, 6, 2), created_at=utc(2026, 6, 5))
    assert past.spans(start, end) == []
