"""What the status page shows beyond what decisions.md asks of it: a detail line per day of
the 90-day bars (uptime, and each outage with its start, length and cause), and a stacked chart
of where the probes' time went over the last 24 hours (DNS, connect, TLS, first byte).

Pure view builders (:func:`day_lines`, :func:`phase_chart`) and :func:`enrich`, which reads
what they need and adds it to a built :class:`engine.web.status.view.StatusView`. The page
stays script-free: a bar is a link to its day's line (``#day-YYYY-MM-DD``), which CSS shows
when it is the fragment's target, so a click, or Tab and Enter, reveals it without
JavaScript; the chart is inline SVG under the page's CSP.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from engine.db.public import DayBar, PublicOutage, StatusPageData
from engine.db.store import Store
from engine.domain.timefmt import fmt
from engine.domain.timings import Slot
from engine.runtime.errors import DatabaseUnavailable
from engine.web.status.view import (
    DayLine,
    PhaseBar,
    PhaseChartView,
    Segment,
    StatusView,
    _cause,
    _nice_max,
    day_anchor,
    duration_text,
    ms_text,
    percent_text,
)

log = logging.getLogger(__name__)


def _outage_words(
    o: PublicOutage, day_start: datetime, assertions: Sequence[Mapping[str, Any]]
) -> str:
    # A start on another day (an outage running over midnight) is given with its date.
    start = fmt(o.started_at) or ""
    shown = start[11:] if o.started_at >= day_start else start
    length = duration_text(o.duration_seconds)
    if o.ended_at is None:
        length += " so far"
    return f"from {shown} UTC for {length}: {_cause(o, assertions)}"


def day_lines(
    days: list[DayBar], outages: list[PublicOutage], now: datetime,
    assertions: Sequence[Mapping[str, Any]] = (),
) -> list[DayLine]:
    """One line per day: ``2026-11-20: 99.30% uptime; 1 outage: from 11:00:00 UTC for
    1 h: Server error (HTTP 503).`` Outages are those overlapping the day, oldest first;
    causes in a visitor's words (``assertions``: the monitor's, to name a failed one)."""
    lines = []
    for d in days:
        start = datetime(d.day.year, d.day.month, d.day.day, tzinfo=UTC)
        end = start + timedelta(days=1)
        uptime = d.uptime
        text = f"{d.day.isoformat()}: "
        text += "no data" if uptime is None else f"{percent_text(uptime)} uptime"
        touching = [o for o in outages
                    if o.started_at < end and (o.ended_at is None or o.ended_at > start)]
        if touching:
            n = len(touching)
            text += f"; {n} outage{'' if n == 1 else 's'}: "
            text += "; ".join(_outage_words(o, start, assertions) for o in touching)
        elif uptime is not None:
            text += "; no outages"
        lines.append(DayLine(day_anchor(d.day), text + "."))
    return lines


# --- the phase chart -------------------------------------------------------------------------

PHASES_SHOWN = (("dns", "DNS"), ("connect", "Connect"), ("tls", "TLS"),
                ("ttfb", "First byte"))
_W = 960
_H = 160
_STEP = _W // 24


def phase_chart(slots: list[Slot]) -> PhaseChartView | None:
    """24 hourly stacked bars of the phases' medians (the median of each phase, stacked: a
    picture of where a typical probe's time goes, not an exact median of the sum), or None
    when no probe with measured phases got a response in the last 24 hours."""
    def measured(slot: Slot) -> bool:
        return slot.responses > 0 and any(
            slot.phases[p]["p50"] is not None for p, _ in PHASES_SHOWN)

    answered = [s for s in slots if measured(s)]
    if not answered:
        return None

    def median(slot: Slot, phase: str) -> float:
        return slot.phases[phase]["p50"] or 0.0

    stacks = [sum(median(s, p) for p, _ in PHASES_SHOWN) for s in slots]
    top = _nice_max(max(stacks) or 1.0)
    bars = []
    for i, s in enumerate(slots):
        hour = (fmt(s.start) or "")[11:16]
        if not measured(s):
            continue
        y = float(_H)
        segments = []
        parts = []
        for phase, words in PHASES_SHOWN:
            ms = median(s, phase)
            if s.phases[phase]["p50"] is not None:
                parts.append(f"{words} {_ms(ms)}")
            h = round(min(1.0, ms / top) * _H, 1)
            if h > 0:
                y = round(y - h, 1)
                segments.append(Segment(f"ph-{phase}", y, h))
        title = (f"{hour} UTC, median of {s.responses} probe{'' if s.responses == 1 else 's'}: "
                 + ", ".join(parts))
        bars.append(PhaseBar(i * _STEP + 2, _STEP - 4, segments, title))
    # The phases' share over the whole window (medians weighted by responses).
    total = sum(s.responses for s in answered)
    shares = []
    for phase, words in PHASES_SHOWN:
        present = [s for s in answered if s.phases[phase]["p50"] is not None]
        if present:
            mean = sum(median(s, phase) * s.responses for s in present) / total
            shares.append(f"{words} {_ms(mean)}")
    summary = ("Where a typical check's time went over the last 24 hours, per hour: "
               + ", ".join(shares) + ".")
    return PhaseChartView(
        width=_W, height=_H, bars=bars,
        y_labels=[ms_text(top), ms_text(top / 2), "0 ms"],
        x_labels=[(fmt(slots[0].start) or "")[11:16] if slots else "", "now"],
        legend=[(f"ph-{p}", w) for p, w in PHASES_SHOWN],
        label="Time per phase, last 24 hours", summary=summary,
    )


def _ms(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 10 else ms_text(ms)


async def enrich(store: Store, data: StatusPageData, view: StatusView) -> StatusView:
    """``view`` with its day lines and phase chart. The page is still worth showing without
    them: a database that fails here leaves them out."""
    from engine.web.api.timings import check_slots

    uptime = data.monitor.checks.get("uptime") or data.monitor.checks.get("heartbeat")
    if uptime is None or not data.days:
        return view
    first = data.days[0].day
    since = datetime(first.year, first.month, first.day, tzinfo=UTC)
    try:
        outages = await store.outages_between(uptime.id, since, data.now)
        slots = await check_slots(store, uptime.id, "24h", data.now)
    except DatabaseUnavailable:
        log.warning("status page shown without day details and phases: database unavailable")
        return view
    return dataclasses.replace(
        view, day_lines=day_lines(data.days, outages, data.now, data.monitor.assertions),
        phases=phase_chart(slots))
