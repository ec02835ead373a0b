"""Outages of one check over a window, for the status page's day-by-day details. Public
reads like engine/db/public.py: one index range (``outages_check_idx``), bounded."""

from __future__ import annotations

from datetime import datetime

from engine.db.base import StoreBase
from engine.db.public import PublicOutage

MAX_OUTAGES = 500  # 90 days of a site flapping every few hours; the rest is not shown

# Outages overlapping [$2, $3], oldest first. The index is (check_id, started_at DESC): the
# newest MAX_OUTAGES are read backwards, then put in order.
SQL_OUTAGES_BETWEEN = """
SELECT started_at, ended_at, http_status_code, error, detected_by, verified_via FROM (
    SELECT started_at, ended_at, http_status_code, error, detected_by, verified_via, id
    FROM outages
    WHERE check_id = $1 AND started_at < $3 AND (ended_at IS NULL OR ended_at > $2)
    ORDER BY started_at DESC, id DESC
    LIMIT $4
) o
ORDER BY started_at, id
"""


class OutageHistoryMixin(StoreBase):
    async def outages_between(self, check_id: int, since: datetime, until: datetime
                              ) -> list[PublicOutage]:
        """Confirmed outages of ``check_id`` overlapping ``[since, until]``, oldest first
        (an open one lasts until ``until``)."""
        rows = await self._fetch(SQL_OUTAGES_BETWEEN, check_id, since, until, MAX_OUTAGES)
        return [
            PublicOutage(
                started_at=r["started_at"],
                ended_at=r["ended_at"],
                duration_seconds=max(
                    0, int(((r["ended_at"] or until) - r["started_at"]).total_seconds())),
                http_status_code=r["http_status_code"],
                error=r["error"],
                detected_by=r["detected_by"],
                verified_via=r["verified_via"],
            )
            for r in rows
        ]
