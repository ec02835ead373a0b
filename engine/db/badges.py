"""What a badge reads: a monitor's checks by identifier, and the uptime and average response
time of its uptime check over a window. Public and unauthenticated like the status page
(engine/db/public.py), so bounded the same way: the identifier's unique index, and index
ranges of one check over at most 30 days of hourly rollups, outages and enabled periods.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.db.base import StoreBase
from engine.db.public import (
    SQL_MONITOR_BY_IDENTIFIER,
    SQL_UPTIME_WINDOW,
    PublicCheck,
    _check_from_row,
)
from engine.domain.stats import average_ms, uptime_percentage

# Responses and their summed times in the window, from the hourly rollups (hours starting in
# it: the first, partial hour is left out rather than counted whole).
SQL_RESPONSES_WINDOW = """
SELECT COALESCE(sum(responses), 0)::bigint AS responses,
       COALESCE(sum(response_ms_sum), 0)::double precision AS response_ms_sum
FROM check_rollups_hourly
WHERE check_id = $1 AND hour >= $2 AND hour <= $3
"""


@dataclass(frozen=True, slots=True)
class BadgeData:
    """``uptime`` (percent) and ``average_ms`` are None without probes (responses) in the
    window, or without an uptime check."""

    checks: dict[str, PublicCheck]
    uptime: float | None
    average_ms: float | None


class BadgesMixin(StoreBase):
    async def badge_data(self, identifier: str, since: datetime, now: datetime
                         ) -> BadgeData | None:
        """The monitor ``identifier``'s figures over ``[since, now]``, or None when there
        is no such monitor. One read-only snapshot."""
        async with self._conn() as conn, conn.transaction(
            isolation="repeatable_read", readonly=True
        ):
            rows = await conn.fetch(SQL_MONITOR_BY_IDENTIFIER, identifier)
            if not rows:
                return None
            checks = {c.kind: c for c in map(_check_from_row, rows)}
            uptime = checks.get("uptime") or checks.get("heartbeat")
            if uptime is None:
                return BadgeData(checks, None, None)
            window = await conn.fetchrow(SQL_UPTIME_WINDOW, uptime.id, since, now)
            responses = await conn.fetchrow(SQL_RESPONSES_WINDOW, uptime.id, since, now)
        assert window is not None and responses is not None  # aggregates: always one row
        probes = int(window["probes"])
        answered = int(responses["responses"])
        return BadgeData(
            checks,
            uptime_percentage(float(window["outage_seconds"]), float(window["enabled_seconds"]),
                              probes) if probes else None,
            average_ms(float(responses["response_ms_sum"]), answered) if answered else None,
        )
