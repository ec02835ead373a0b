"""What the public status page reads: a monitor by identifier, daily uptime bars, the last
24 hours of response times, the 30-day uptime and recent outages. Read-only.

The page is public and unauthenticated, so anyone can make it run these queries as often as
they like. Each one is therefore bounded by an index range on one check and a fixed window:

- the monitor and its checks: the unique index on ``monitors.identifier`` and the
  ``(monitor_id, kind)`` unique index of ``checks``;
- daily bars and the 30-day figure: the ``check_rollups_hourly`` primary key (at most
  90 x 24 rows), ``outages_check_idx`` and the ``check_periods`` primary key;
- response times: ``probe_results_check_at_idx`` on the (one or two) daily partitions that
  hold the last 24 hours, aggregated into 5-minute buckets in the database so at most ~289
  rows travel;
- recent outages: ``outages_check_idx`` read backwards, ``LIMIT 10``.

All reads of one page run in one read-only REPEATABLE READ transaction: one pooled
connection per page view, and figures that agree with each other (a bar and the outage list
never come from two different moments).

Day arithmetic is done on epoch seconds (``date_part``: double precision, cheaper per row
than ``EXTRACT``'s numeric) relative to a UTC midnight that Python computes, so it does not
depend on the session time zone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg

from engine.db.base import StoreBase
from engine.domain.stats import uptime_percentage
from engine.domain.timefmt import utcnow

DAYS_SHOWN = 90
UPTIME_WINDOW = timedelta(days=30)
RESPONSE_WINDOW = timedelta(hours=24)
BUCKET_SECONDS = 300
OUTAGES_SHOWN = 10
_DAY = 86400

# One row per check of the monitor (two). Deleted monitors have no row: the caller's 404.
SQL_MONITOR_BY_IDENTIFIER = """
SELECT m.id, m.identifier, m.alias, m.scheme,
       -- A dns:// monitor shows the name it asks about, never its server's address.
       CASE WHEN m.scheme = 'dns' THEN split_part(split_part(m.url, '/', 4), '?', 1)
            ELSE m.host END AS host,
       m.assertions,
       c.id AS check_id, c.kind, c.status, c.error, c.interval_s, c.is_enabled,
       c.last_check_at, c.meta
FROM monitors m
JOIN checks c ON c.monitor_id = m.id
WHERE m.identifier = $1
"""

# Per UTC day i in [0, $4) counted from $2 (a UTC midnight) up to $3 (now): probes and
# failures from the hourly rollups, and confirmed-outage seconds and enabled seconds clipped
# to the day (an open outage or period runs to now). An outage or period is spread over the
# days it touches with a per-row generate_series, so the cost follows the rows in the window
# rather than rows x days.
SQL_DAILY_UPTIME = """
WITH bounds AS (
    SELECT date_part('epoch', $2::timestamptz) AS w0,
           date_part('epoch', $3::timestamptz) AS w1
),
rollups AS (
    SELECT floor((date_part('epoch', r.hour) - b.w0) / 86400)::int AS i,
           sum(r.probes)::bigint AS probes,
           sum(r.failures)::bigint AS failures
    FROM check_rollups_hourly r, bounds b
    WHERE r.check_id = $1 AND r.hour >= $2 AND r.hour <= $3
    GROUP BY 1
),
outage_spans AS (
    SELECT GREATEST(date_part('epoch', o.started_at), b.w0) AS s,
           LEAST(COALESCE(date_part('epoch', o.ended_at), b.w1), b.w1) AS e
    FROM outages o, bounds b
    WHERE o.check_id = $1 AND o.started_at < $3 AND (o.ended_at IS NULL OR o.ended_at > $2)
),
outage_days AS (
    SELECT d.i, sum(GREATEST(0, LEAST(x.e, b.w0 + (d.i + 1) * 86400.0)
                                - GREATEST(x.s, b.w0 + d.i * 86400.0))) AS seconds
    FROM outage_spans x, bounds b,
         LATERAL generate_series(floor((x.s - b.w0) / 86400)::int,
                                 floor((x.e - b.w0) / 86400)::int) AS d(i)
    WHERE x.e > x.s
    GROUP BY d.i
),
period_spans AS (
    SELECT GREATEST(date_part('epoch', p.started_at), b.w0) AS s,
           LEAST(COALESCE(date_part('epoch', p.ended_at), b.w1), b.w1) AS e
    FROM check_periods p, bounds b
    WHERE p.check_id = $1 AND p.started_at < $3 AND (p.ended_at IS NULL OR p.ended_at > $2)
),
period_days AS (
    SELECT d.i, sum(GREATEST(0, LEAST(x.e, b.w0 + (d.i + 1) * 86400.0)
                                - GREATEST(x.s, b.w0 + d.i * 86400.0))) AS seconds
    FROM period_spans x, bounds b,
         LATERAL generate_series(floor((x.s - b.w0) / 86400)::int,
                                 floor((x.e - b.w0) / 86400)::int) AS d(i)
    WHERE x.e > x.s
    GROUP BY d.i
)
SELECT days.i,
       COALESCE(r.probes, 0) AS probes,
       COALESCE(r.failures, 0) AS failures,
       COALESCE(od.seconds, 0)::double precision AS outage_seconds,
       COALESCE(pd.seconds, 0)::double precision AS enabled_seconds
FROM generate_series(0, $4::int - 1) AS days(i)
LEFT JOIN rollups r ON r.i = days.i
LEFT JOIN outage_days od ON od.i = days.i
LEFT JOIN period_days pd ON pd.i = days.i
ORDER BY days.i
"""

# The rolling 30-day window [$2, $3 = now] of decisions.md "Statistics": the same sums the
# API's statistics use, for one check.
SQL_UPTIME_WINDOW = """
SELECT
    (SELECT COALESCE(sum(probes), 0)::bigint
       FROM check_rollups_hourly
      WHERE check_id = $1 AND hour >= $2) AS probes,
    (SELECT COALESCE(sum(EXTRACT(EPOCH FROM LEAST(COALESCE(ended_at, $3), $3)
                                            - GREATEST(started_at, $2))), 0)::double precision
       FROM outages
      WHERE check_id = $1 AND started_at < $3 AND (ended_at IS NULL OR ended_at > $2))
        AS outage_seconds,
    (SELECT COALESCE(sum(EXTRACT(EPOCH FROM LEAST(COALESCE(ended_at, $3), $3)
                                            - GREATEST(started_at, $2))), 0)::double precision
       FROM check_periods
      WHERE check_id = $1 AND started_at < $3 AND (ended_at IS NULL OR ended_at > $2))
        AS enabled_seconds
"""

# Uptime probes that got a response in [$2, $3], averaged per $4-second bucket. kind = 1 is
# an uptime probe; a probe without a status code got no response and has no response time.
SQL_RESPONSE_BUCKETS = """
SELECT (floor(date_part('epoch', at) / $4) * $4)::bigint AS bucket,
       avg(total_ms)::double precision AS avg_ms,
       max(total_ms)::double precision AS max_ms,
       count(*)::int AS samples
FROM probe_results
WHERE check_id = $1 AND at >= $2 AND at <= $3
  AND kind = 1 AND status_code IS NOT NULL AND total_ms IS NOT NULL
GROUP BY 1
ORDER BY 1
"""

SQL_RECENT_OUTAGES = """
SELECT started_at, ended_at, http_status_code, error, detected_by, verified_via
FROM outages
WHERE check_id = $1
ORDER BY started_at DESC, id DESC
LIMIT $2
"""


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PublicCheck:
    """One check as the public sees it. ``meta`` is the last probe's facts (certificate:
    ``issuer``, ``valid_to`` ...; may be empty before the first run)."""

    id: int
    kind: str
    status: str
    error: str | None
    interval: int
    is_enabled: bool
    last_check_at: datetime | None
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PublicMonitor:
    id: int
    identifier: str
    alias: str
    scheme: str
    host: str
    checks: dict[str, PublicCheck]
    # The uptime check's assertions as stored ({source, property, comparison, target}): the
    # status page names a failed one by its source and property, never by its target.
    assertions: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DayBar:
    """One UTC day of the uptime check. ``uptime`` is None ("no data") without probes."""

    day: date
    probes: int
    failures: int
    outage_seconds: float
    enabled_seconds: float

    @property
    def uptime(self) -> float | None:
        if self.probes <= 0:
            return None
        return uptime_percentage(self.outage_seconds, self.enabled_seconds, self.probes)


@dataclass(frozen=True, slots=True)
class ResponseBucket:
    """Uptime probes with a response in the bucket starting at ``start``."""

    start: datetime
    avg_ms: float
    max_ms: float
    samples: int


@dataclass(frozen=True, slots=True)
class PublicOutage:
    """A confirmed outage; ``ended_at`` None while ongoing (``duration_seconds`` so far).
    ``detected_by`` is the region of the first failed probe, ``verified_via`` the region of
    the probe that confirmed it (the same region: a second local probe)."""

    started_at: datetime
    ended_at: datetime | None
    duration_seconds: int
    http_status_code: int | None
    error: str | None
    detected_by: str | None = None
    verified_via: str | None = None


@dataclass(frozen=True, slots=True)
class StatusPageData:
    """Everything the status page shows, read at ``now`` in one snapshot.

    ``days`` holds ``DAYS_SHOWN`` bars, oldest first, the last one being today (UTC, so
    far). ``responses`` covers ``[now - 24 h, now]``, oldest first. ``outages`` are the
    newest ``OUTAGES_SHOWN``, newest first. Without an uptime check (never the case for
    monitors the API creates) the uptime parts are empty and ``uptime_30d`` is 100.
    """

    now: datetime
    monitor: PublicMonitor
    uptime_30d: float
    probes_30d: int
    days: list[DayBar]
    responses: list[ResponseBucket]
    outages: list[PublicOutage]


def _check_from_row(row: asyncpg.Record) -> PublicCheck:
    meta = row["meta"]
    return PublicCheck(
        id=row["check_id"],
        kind=row["kind"],
        status=row["status"],
        error=row["error"],
        interval=row["interval_s"],
        is_enabled=row["is_enabled"],
        last_check_at=row["last_check_at"],
        meta=meta if isinstance(meta, dict) else {},
    )


def _assertions(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [a for a in value if isinstance(a, dict)]


def _utc_midnight(ts: datetime) -> datetime:
    ts = ts.astimezone(UTC)
    return datetime(ts.year, ts.month, ts.day, tzinfo=UTC)


class PublicMixin(StoreBase):
    async def status_page(
        self, identifier: str, *, now: datetime | None = None
    ) -> StatusPageData | None:
        """The status page of the monitor ``identifier`` as of ``now`` (default: the clock),
        or None when no such monitor exists (unknown or deleted). Read-only; raises
        :class:`engine.runtime.errors.DatabaseUnavailable` when the database cannot be reached."""
        now = (now or utcnow()).astimezone(UTC)
        first_day = _utc_midnight(now) - timedelta(days=DAYS_SHOWN - 1)
        async with self._conn() as conn, conn.transaction(
            isolation="repeatable_read", readonly=True
        ):
            rows = await conn.fetch(SQL_MONITOR_BY_IDENTIFIER, identifier)
            if not rows:
                return None
            checks = {c.kind: c for c in map(_check_from_row, rows)}
            monitor = PublicMonitor(
                id=rows[0]["id"],
                identifier=rows[0]["identifier"],
                alias=rows[0]["alias"],
                scheme=rows[0]["scheme"],
                host=rows[0]["host"],
                checks=checks,
                assertions=_assertions(rows[0]["assertions"]),
            )
            uptime = checks.get("uptime") or checks.get("heartbeat")
            if uptime is None:
                return StatusPageData(now, monitor, 100.0, 0, [], [], [])
            day_rows = await conn.fetch(SQL_DAILY_UPTIME, uptime.id, first_day, now, DAYS_SHOWN)
            window = await conn.fetchrow(SQL_UPTIME_WINDOW, uptime.id, now - UPTIME_WINDOW, now)
            bucket_rows = await conn.fetch(
                SQL_RESPONSE_BUCKETS, uptime.id, now - RESPONSE_WINDOW, now, BUCKET_SECONDS
            )
            outage_rows = await conn.fetch(SQL_RECENT_OUTAGES, uptime.id, OUTAGES_SHOWN)

        days = [
            DayBar(
                day=(first_day + timedelta(days=r["i"])).date(),
                probes=int(r["probes"]),
                failures=int(r["failures"]),
                outage_seconds=float(r["outage_seconds"]),
                enabled_seconds=float(r["enabled_seconds"]),
            )
            for r in day_rows
        ]
        assert window is not None  # an aggregate-only SELECT always returns one row
        probes_30d = int(window["probes"])
        responses = [
            ResponseBucket(
                start=datetime.fromtimestamp(r["bucket"], UTC),
                avg_ms=float(r["avg_ms"]),
                max_ms=float(r["max_ms"]),
                samples=int(r["samples"]),
            )
            for r in bucket_rows
        ]
        outages = [
            PublicOutage(
                started_at=r["started_at"],
                ended_at=r["ended_at"],
                duration_seconds=max(
                    0, int(((r["ended_at"] or now) - r["started_at"]).total_seconds())
                ),
                http_status_code=r["http_status_code"],
                error=r["error"],
                detected_by=r["detected_by"],
                verified_via=r["verified_via"],
            )
            for r in outage_rows
        ]
        return StatusPageData(
            now=now,
            monitor=monitor,
            uptime_30d=uptime_percentage(
                float(window["outage_seconds"]), float(window["enabled_seconds"]), probes_30d
            ),
            probes_30d=probes_30d,
            days=days,
            responses=responses,
            outages=outages,
        )
