"""Maintenance on the status page: a notice for a monitor's window that is on now or starts
within ``HORIZON`` (plain strings), and the 30-day uptime net of windows, as the statistics
endpoint computes it (docs/alerts.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from engine.db.public import UPTIME_WINDOW, StatusPageData
from engine.db.store import Store
from engine.maintenance_windows import Window, net_of_maintenance, notices, spans_of
from engine.stats import uptime_percentage
from engine.timefmt import fmt

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


async def with_maintenance(
    store: Store, data: StatusPageData
) -> tuple[StatusPageData, list[MaintenanceNotice]]:
    """``data`` with its 30-day uptime net of the monitor's windows, and the notices to show.
    A monitor without windows costs one small query; one with windows in the 30 days, three."""
    now = data.now
    since = now - UPTIME_WINDOW
    windows = await store.windows_of_monitor(data.monitor.id, since)
    if not windows:
        return data, []
    spans = spans_of(windows, since, now)
    uptime = data.monitor.checks.get("uptime")
    if spans and uptime is not None:
        probes, outage_s, enabled_s = await store.uptime_inputs(uptime.id, since, now)
        outages = (await store.outage_spans([uptime.id], since, now)).get(uptime.id, [])
        outage_s, enabled_s, _ = net_of_maintenance(
            outage_s, enabled_s, outages, spans, since, now)
        data = replace(data, uptime_30d=uptime_percentage(outage_s, enabled_s, probes))
    return data, maintenance_notices(windows, now)
