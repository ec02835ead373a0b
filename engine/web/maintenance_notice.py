"""The status page's maintenance notice: a monitor's window that is on now or starts within
``HORIZON``, as plain strings (pure; ``now`` passed in)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from engine.maintenance_windows import Window, notices
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
