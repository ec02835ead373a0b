"""Monitors and checks as the API reads them: the list, one monitor, one check, a
monitor's check ids and URL scheme, the account's count, a monitor's statistics.

Every method takes the account id and only ever returns that account's rows: a monitor or
check of another account raises :class:`NotFound` exactly like a missing one.

Figures (uptime percentage, response times, checks run) come from the hourly rollups,
outages and enabled periods, never from raw probe results; the list computes them for all
of an account's monitors in a fixed number of queries.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from engine.db.base import StoreBase
from engine.db.monitor_records import (
    CheckRecord,
    MonitorRecord,
    OutageRecord,
    StatisticsRecord,
    UptimeFigures,
    group_monitors,
    monitor_of,
)
from engine.domain.timefmt import utcnow
from engine.runtime.errors import NotFound

STATS_WINDOW = timedelta(days=30)
# Outages listed by the statistics endpoint, newest first. Thirty days of a flapping site
# probed every 30 s could hold tens of thousands; the newest thousand tell the story.
MAX_OUTAGES_LISTED = 1000

# The columns of a monitor's and a check's record (engine/db/monitor_records.py).
_MONITOR_COLUMNS = (
    "m.id, m.identifier, m.alias, m.url, m.scheme, m.host, m.port, m.request, m.assertions"
)
_CHECK_COLUMNS = (
    "c.id, c.monitor_id, c.kind, c.status, c.error, c.interval_s, c.is_enabled,"
    " c.notification_threshold_s, c.last_check_at, c.meta,"
    " c.recovery_threshold_s, c.expiry_threshold_percent, c.expiry_threshold_days"
)

def _seconds_in_window(table: str, alias: str, start: str, now: str) -> str:
    """The lateral ``alias``: seconds of check ``c``'s rows of ``table`` (outages, enabled
    periods) inside the window [``start``, ``now``], an open one running to now."""
    return f"""
LEFT JOIN LATERAL (
    SELECT sum(EXTRACT(EPOCH FROM LEAST(COALESCE(ended_at, {now}), {now})
                                  - GREATEST(started_at, {start})))::double precision AS seconds
    FROM {table}
    WHERE check_id = c.id AND c.kind IN ('uptime', 'heartbeat')
      AND started_at < {now} AND (ended_at IS NULL OR ended_at > {start})
) {alias} ON true"""


def _figure_laterals(start: str, now: str) -> str:
    """The 30-day figures of the uptime check ``c`` over the window [``start``, ``now``]
    (SQL parameters): probes and responses from the rollups (an index-only scan of their
    primary key, migration 0002), confirmed outage seconds and enabled seconds clipped to
    the window, and the start of the open outage. The kind test is a one-time filter:
    nothing is read for a certificate check's row (a heartbeat's one check stands where a
    URL monitor's uptime check would)."""
    outages = _seconds_in_window("outages", "o", start, now)
    periods = _seconds_in_window("check_periods", "p", start, now)
    return f"""
LEFT JOIN LATERAL (
    SELECT sum(probes)::bigint AS probes, sum(responses)::bigint AS responses,
           sum(response_ms_sum)::double precision AS ms_sum
    FROM check_rollups_hourly
    WHERE check_id = c.id AND c.kind IN ('uptime', 'heartbeat') AND hour >= {start}
) r ON true{outages}{periods}
LEFT JOIN LATERAL (
    SELECT started_at FROM outages
    WHERE check_id = c.id AND c.kind IN ('uptime', 'heartbeat') AND ended_at IS NULL
    ORDER BY started_at DESC LIMIT 1
) open_outage ON true
"""


_FIGURE_COLUMNS = """
       COALESCE(r.probes, 0) AS probes,
       COALESCE(r.responses, 0) AS responses,
       COALESCE(r.ms_sum, 0) AS ms_sum,
       COALESCE(o.seconds, 0) AS outage_seconds,
       COALESCE(p.seconds, 0) AS enabled_seconds,
       open_outage.started_at AS offline_since"""

# Monitors with their checks, the uptime check's figures on its row: ONE statement, so one
# round trip and one snapshot for a list or a get.
_MONITORS_WITH_FIGURES = f"""
SELECT {_MONITOR_COLUMNS}, {_CHECK_COLUMNS.replace("c.id,", "c.id AS check_id,", 1)},
{_FIGURE_COLUMNS}
FROM monitors m JOIN checks c ON c.monitor_id = m.id
"""

# Every monitor of account $1 (by id), window [$2, $3 = now].
SQL_MONITORS_OF_ACCOUNT = f"""{_MONITORS_WITH_FIGURES}
{_figure_laterals("$2", "$3")}
WHERE m.account_id = $1
ORDER BY m.id, c.kind DESC
"""

# Monitor $2 of account $1, window [$3, $4 = now].
SQL_MONITOR_OF_ACCOUNT = f"""{_MONITORS_WITH_FIGURES}
{_figure_laterals("$3", "$4")}
WHERE m.account_id = $1 AND m.id = $2
ORDER BY c.kind DESC
"""

# The uptime check of monitor $2 of account $1 with its figures, window [$3, $4 = now].
SQL_UPTIME_FIGURES_OF_MONITOR = f"""
SELECT c.id AS check_id, {_FIGURE_COLUMNS}
FROM monitors m JOIN checks c ON c.monitor_id = m.id AND c.kind IN ('uptime', 'heartbeat')
{_figure_laterals("$3", "$4")}
WHERE m.account_id = $1 AND m.id = $2
"""

SQL_CHECK_IDS_OF_MONITOR = """
SELECT c.kind, c.id FROM monitors m JOIN checks c ON c.monitor_id = m.id
WHERE m.account_id = $1 AND m.id = $2
"""

SQL_OUTAGES_IN_WINDOW = """
SELECT started_at, ended_at, http_status_code
FROM outages
WHERE check_id = $1 AND (ended_at IS NULL OR ended_at > $2)
ORDER BY started_at DESC, id DESC
LIMIT $3
"""

SQL_COUNT_MONITORS = "SELECT count(*) FROM monitors WHERE account_id = $1"

SQL_SCHEME_OF_MONITOR = "SELECT scheme FROM monitors WHERE account_id = $1 AND id = $2"
SQL_SCHEME_OF_CHECK = """
SELECT m.scheme FROM checks c JOIN monitors m ON m.id = c.monitor_id
WHERE m.account_id = $1 AND c.id = $2
"""

SQL_CHECK_OF_ACCOUNT = f"""
SELECT {_CHECK_COLUMNS}
FROM checks c JOIN monitors m ON m.id = c.monitor_id
WHERE c.id = $1 AND m.account_id = $2
"""


class MonitorReadsMixin(StoreBase):
    """The reads of monitors and checks. Each is a single statement outside any explicit
    transaction: BEGIN and COMMIT would be two more round trips and, at READ COMMITTED, give
    two statements no common snapshot."""

    async def list_monitors(
        self, account_id: int, *, now: datetime | None = None
    ) -> list[MonitorRecord]:
        """Every monitor of the account (by id) with checks and 30-day uptime figures, in
        one query whatever the number of monitors."""
        now = now or utcnow()
        rows = await self._fetch(SQL_MONITORS_OF_ACCOUNT, account_id, now - STATS_WINDOW, now)
        return group_monitors(rows)

    async def get_monitor(
        self, account_id: int, monitor_id: int, *, now: datetime | None = None
    ) -> MonitorRecord:
        """One monitor as in :meth:`list_monitors`, in one query; NotFound when not the
        account's."""
        now = now or utcnow()
        rows = await self._fetch(
            SQL_MONITOR_OF_ACCOUNT, account_id, monitor_id, now - STATS_WINDOW, now)
        if not rows:
            raise NotFound("Monitor not found.")
        return monitor_of(rows)

    async def get_check_ids(self, account_id: int, monitor_id: int) -> dict[str, int]:
        """The monitor's check ids by kind (a cheap existence test); NotFound when the
        monitor is not the account's."""
        rows = await self._fetch(SQL_CHECK_IDS_OF_MONITOR, account_id, monitor_id)
        if not rows:
            raise NotFound("Monitor not found.")
        return {r["kind"]: r["id"] for r in rows}

    async def scheme_of(
        self, account_id: int, *, monitor_id: int | None = None, check_id: int | None = None
    ) -> str | None:
        """The URL scheme of the account's monitor ``monitor_id`` (or of check
        ``check_id``'s monitor); None when the account has no such monitor or check."""
        if monitor_id is not None:
            scheme: str | None = await self._fetchval(
                SQL_SCHEME_OF_MONITOR, account_id, monitor_id)
        else:
            scheme = await self._fetchval(SQL_SCHEME_OF_CHECK, account_id, check_id)
        return scheme

    async def count_monitors(self, account_id: int) -> int:
        return int(await self._fetchval(SQL_COUNT_MONITORS, account_id))

    async def monitor_statistics(
        self, account_id: int, monitor_id: int, *, now: datetime | None = None
    ) -> StatisticsRecord:
        """30-day statistics of the monitor's uptime check (decisions.md "Statistics");
        figures None and no outages for a monitor without one."""
        now = now or utcnow()
        since = now - STATS_WINDOW
        async with self._conn() as conn:
            row = await conn.fetchrow(
                SQL_UPTIME_FIGURES_OF_MONITOR, account_id, monitor_id, since, now)
            if row is None:
                if not await conn.fetch(SQL_CHECK_IDS_OF_MONITOR, account_id, monitor_id):
                    raise NotFound("Monitor not found.")
                return StatisticsRecord(now=now, figures=None, outages=[])
            rows = await conn.fetch(
                SQL_OUTAGES_IN_WINDOW, row["check_id"], since, MAX_OUTAGES_LISTED)
        outages = [
            OutageRecord(r["started_at"], r["ended_at"], r["http_status_code"]) for r in rows
        ]
        return StatisticsRecord(now=now, figures=UptimeFigures.from_row(row), outages=outages)

    async def get_check(self, account_id: int, check_id: int) -> CheckRecord:
        """One check of the account; NotFound otherwise."""
        row = await self._fetchrow(SQL_CHECK_OF_ACCOUNT, check_id, account_id)
        if row is None:
            raise NotFound("Check not found.")
        return CheckRecord.from_row(row)
