"""Maintenance on the status page: a notice for a monitor's window that is on now or starts
within ``HORIZON`` (plain strings), and the 30-day uptime and the daily bars net of windows,
as the statistics endpoint computes uptime (docs/alerts.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, time, timedelta
from typing import Any

from engine.db.public import UPTIME_WINDOW, DayBar, StatusPageData
from engine.db.store import Store
from engine.domain.maintenance import Window, net_of_maintenance, notices, spans_of
from engine.domain.stats import uptime_percentage
from engine.domain.timefmt import fmt

HORIZON = timedelta(days=7)  # upcoming windows announced this far ahead
SHOWN = 3  # notices on one page, at most


@dataclass(frozen=True, slots=True)
class MaintenanceNotice:
    active: bool
    headline: str
    when: str
    reason: str  # the operator's text, escaped by the template like every user string
    starts_at: datetime
    ends_at: datetime


def maintenance_notices(windows: list[Window], now: datetime) -> list[MaintenanceNotice]:
    out = []
    for w, (begin, end) in notices(windows, now, HORIZON)[:SHOWN]:
        active = begin <= now
        out.append(MaintenanceNotice(
            active=active,
            headline="Maintenance in progress" if active else "Scheduled maintenance",
            when=(f"until {fmt(end)} UTC" if active
                  else f"from {fmt(begin)} to {fmt(end)} UTC"),
            reason=w.reason,
            starts_at=begin,
            ends_at=end,
        ))
    return out


def notices_json(items: list[MaintenanceNotice]) -> list[dict[str, Any]]:
    """The status page JSON's ``maintenance`` list."""
    return [
        {"active": n.active, "starts_at": fmt(n.starts_at), "ends_at": fmt(n.ends_at),
         "reason": n.reason}
        for n in items
    ]


def bars_net_of_maintenance(
    days: list[DayBar], outages: list[tuple[datetime, datetime]],
    spans: list[tuple[datetime, datetime]], now: datetime,
) -> list[DayBar]:
    """``days`` (UTC days, the last one up to ``now``) with the windows' time taken out of each
    day's outage and enabled seconds, as :func:`net_of_maintenance` does for 30 days: a day
    whose only downtime fell in a declared window shows as up."""
    out = []
    for d in days:
        start = datetime.combine(d.day, time(), UTC)
        end = min(start + timedelta(days=1), now)
        if end <= start or not any(b < end and e > start for b, e in spans):
            out.append(d)
            continue
        outage_s, enabled_s, _ = net_of_maintenance(
            d.outage_seconds, d.enabled_seconds, outages, spans, start, end)
        out.append(replace(d, outage_seconds=outage_s, enabled_seconds=enabled_s))
    return out


async def with_maintenance(
    store: Store, data: StatusPageData
) -> tuple[StatusPageData, list[MaintenanceNotice]]:
    """``data`` with its 30-day uptime and its daily bars net of the monitor's windows, and the
    notices to show. A monitor without windows costs one small query; one with windows in the
    days shown, three."""
    now = data.now
    since = now - UPTIME_WINDOW
    first = datetime.combine(data.days[0].day, time(), UTC) if data.days else since
    start = min(first, since)
    windows = await store.windows_of_monitor(data.monitor.id, start)
    if not windows:
        return data, []
    spans = spans_of(windows, start, now)
    uptime = data.monitor.checks.get("uptime") or data.monitor.checks.get("heartbeat")
    if spans and uptime is not None:
        outages = (await store.outage_spans([uptime.id], start, now)).get(uptime.id, [])
        days = bars_net_of_maintenance(data.days, outages, spans, now)
        uptime_30d = data.uptime_30d
        if any(e > since for _, e in spans):
            probes, outage_s, enabled_s = await store.uptime_inputs(uptime.id, since, now)
            outage_s, enabled_s, _ = net_of_maintenance(
                outage_s, enabled_s, outages, spans, since, now)
            uptime_30d = uptime_percentage(outage_s, enabled_s, probes)
        data = replace(data, uptime_30d=uptime_30d, days=days)
    return data, maintenance_notices(windows, now)
