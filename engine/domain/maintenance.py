"""Maintenance windows as time: pure functions of a window (or a monitor's windows) and ``now``.

A window is one-off (``starts_at`` .. ``ends_at``, UTC) or weekly: a local ``start_time`` on
a ``weekday`` (0 = Monday) in an IANA ``time_zone``, lasting ``duration_s``. A weekly window
follows the zone's clock across daylight-saving changes: 02:00 Europe/Berlin is 01:00 UTC in
winter and 00:00 UTC in summer. The duration is elapsed time, so a window over a change
lasts what it says. A start time that a spring-forward gap skips (02:30 on the day clocks
jump from 02:00 to 03:00) is read with the offset before the gap (``fold=0``: the window
starts at 03:30 local time, the instant 02:30 would have been); one that a fall-back makes
happen twice starts at the first of them.

Windows are ``[start, end)``: a probe at ``end`` is outside. Overlapping or touching
windows of one monitor act as one (``quiet`` gives the end of the whole run). A window
counts from its creation (``created_at``) on: one entered with a start in the past is on
from then, and no time before it is maintenance, so past downtime cannot be excused after
the fact.
No I/O and no clock here: the engine, the API and the status page pass ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# How far back the engine looks for a window's end: thresholds (alert, recovery) are at most
# a day, so an end older than this can no longer restart one.
LOOKBACK = timedelta(days=8)

Span = tuple[datetime, datetime]


@dataclass(frozen=True, slots=True)
class Window:
    """One maintenance window; ``monitor_ids`` None means every monitor of the account."""

    id: int
    reason: str
    monitor_ids: tuple[int, ...] | None
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    weekday: int | None = None
    start_time: time | None = None
    duration_s: int | None = None
    time_zone: str | None = None
    created_at: datetime | None = None  # None: counts from any time (tests, previews)

    @property
    def weekly(self) -> bool:
        return self.weekday is not None

    def spans(self, start: datetime, end: datetime) -> list[Span]:
        """The window's occurrences (UTC) that overlap ``[start, end)``, in order, from its
        creation on."""
        created = self.created_at
        if created is None:
            return self.declared_spans(start, end)
        out = []
        for begin, finish in self.declared_spans(max(start, created), end):
            if finish > created:
                out.append((max(begin, created), finish))
        return out

    def declared_spans(self, start: datetime, end: datetime) -> list[Span]:
        """The occurrences as declared, whenever the window was created (what is shown)."""
        if not self.weekly:
            assert self.starts_at is not None and self.ends_at is not None
            if self.starts_at < end and self.ends_at > start:
                return [(self.starts_at, self.ends_at)]
            return []
        assert self.start_time is not None and self.duration_s is not None
        assert self.time_zone is not None and self.weekday is not None
        zone = ZoneInfo(self.time_zone)
        length = timedelta(seconds=self.duration_s)
        # Local dates from the one an occurrence ending after ``start`` could begin on, to
        # the one of ``end``; a day either side covers any UTC offset.
        first = (start - length).astimezone(zone).date() - timedelta(days=1)
        last = end.astimezone(zone).date() + timedelta(days=1)
        out: list[Span] = []
        day = first + timedelta(days=(self.weekday - first.weekday()) % 7)
        while day <= last:
            begin = _local_start(day, self.start_time, zone)
            finish = begin + length
            if begin < end and finish > start:
                out.append((begin, finish))
            day += timedelta(days=7)
        return out


def _local_start(day: date, at: time, zone: ZoneInfo) -> datetime:
    """The UTC instant of local ``at`` on ``day`` in ``zone`` (fold=0, see the module)."""
    return datetime.combine(day, at.replace(tzinfo=None, fold=0), tzinfo=zone).astimezone(UTC)


def merged(spans: Iterable[Span]) -> list[Span]:
    """Spans sorted, with overlapping or touching ones joined."""
    out: list[Span] = []
    for begin, finish in sorted(spans):
        if out and begin <= out[-1][1]:
            if finish > out[-1][1]:
                out[-1] = (out[-1][0], finish)
        else:
            out.append((begin, finish))
    return out


def spans_of(windows: Sequence[Window], start: datetime, end: datetime) -> list[Span]:
    """Every occurrence of ``windows`` overlapping ``[start, end)``, merged."""
    return merged(s for w in windows for s in w.spans(start, end))


def quiet(
    windows: Sequence[Window], now: datetime, *, lookback: timedelta = LOOKBACK
) -> tuple[datetime | None, datetime | None]:
    """(``muted_until``, ``resumed_at``) for the engine's state machine
    (``engine.domain.evaluate.evaluate_uptime``): the end of the run of windows ``now`` is in (None
    when in none), and the end of the last window that ended at or before ``now`` (None
    when none did within ``lookback``)."""
    if not windows:
        return None, None
    muted_until: datetime | None = None
    resumed_at: datetime | None = None
    # Spans up to a week ahead, so that a run of windows is followed to its end.
    for begin, finish in spans_of(windows, now - lookback, now + timedelta(days=8)):
        if finish <= now:
            resumed_at = finish
        elif begin <= now:
            muted_until = finish
    return muted_until, resumed_at


def seconds_within(spans: Sequence[Span], start: datetime, end: datetime) -> float:
    """Seconds of merged ``spans`` inside ``[start, end)``."""
    total = 0.0
    for begin, finish in spans:
        lo, hi = max(begin, start), min(finish, end)
        if hi > lo:
            total += (hi - lo).total_seconds()
    return total


def overlap_seconds(a: Sequence[Span], b: Sequence[Span]) -> float:
    """Seconds covered by both lists of merged spans."""
    total = 0.0
    for begin, finish in a:
        total += seconds_within(b, begin, finish)
    return total


def net_of_maintenance(
    outage_seconds: float,
    enabled_seconds: float,
    outages: Iterable[Span],
    spans: Sequence[Span],
    start: datetime,
    end: datetime,
) -> tuple[float, float, float]:
    """(outage, enabled, maintenance) seconds of ``[start, end)`` with the time of the merged
    window ``spans`` taken out of both figures: what uptime is computed from (docs/alerts.md).
    ``outages`` are the outage spans (an open one ending at ``end``)."""
    maintenance = seconds_within(spans, start, end)
    clipped = [(max(b, start), min(e, end)) for b, e in outages]
    overlap = overlap_seconds(merged(s for s in clipped if s[1] > s[0]), spans)
    return (
        max(0.0, outage_seconds - overlap),
        max(0.0, enabled_seconds - maintenance),
        maintenance,
    )


def notices(
    windows: Sequence[Window], now: datetime, horizon: timedelta
) -> list[tuple[Window, Span]]:
    """Windows on now or starting within ``horizon``: (window, its occurrence as declared),
    by start. What the status page announces."""
    out = []
    for w in windows:
        for span in w.declared_spans(now, now + horizon):
            out.append((w, span))
            break  # its next occurrence is enough
    out.sort(key=lambda item: (item[1][0], item[0].id))
    return out


def next_span(window: Window, now: datetime) -> Span | None:
    """The occurrence (as declared) that is on at ``now``, else the next one; None for a
    one-off window that is over."""
    spans = window.declared_spans(now, now + timedelta(days=8))
    return spans[0] if spans else None
