"""Test data for the status page tests, written with plain SQL (no engine, no API), so the
tests pin down what the page reads from the schema and nothing else.

:func:`seed_site` builds a monitor with 100 days of history ending at ``now``:

- uptime check enabled from ``now - 100 d`` (one period), certificate check enabled;
- hourly rollups for every hour of those 100 days except the whole UTC day ``now - 40 d``
  (a "no data" bar), 120 probes an hour;
- confirmed outages: one of 1 h ending at noon UTC on the day of ``now - 3 d``, one spanning
  the midnight
  before ``now - 10 d``, and (``ongoing=True``) one started 30 minutes ago and still open;
- one uptime probe result a minute for the last 25 hours (the oldest hour must be left out
  of the chart), with a response time that rises and falls, plus probes without response
  and certificate probes that the chart must ignore.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg


@dataclass(frozen=True)
class Site:
    monitor_id: int
    identifier: str
    uptime_id: int
    certificate_id: int


async def insert_account(conn: asyncpg.Connection) -> int:
    token = secrets.token_hex(16)
    return int(await conn.fetchval(
        "INSERT INTO accounts (name, token, token_sha256) VALUES ('status', $1, $2) RETURNING id",
        token, hashlib.sha256(token.encode()).digest(),
    ))


async def insert_monitor(
    conn: asyncpg.Connection,
    *,
    alias: str = "Example Shop",
    host: str = "shop.example.com",
    identifier: str | None = None,
    uptime_status: str = "ok",
    uptime_error: str | None = None,
    certificate_status: str = "ok",
    certificate_error: str | None = None,
    uptime_enabled: bool = True,
    certificate_enabled: bool = True,
    last_check_at: datetime | None = None,
    certificate_meta: dict[str, Any] | None = None,
    uptime_meta: dict[str, Any] | None = None,
    interval: int = 60,
) -> Site:
    """A monitor with both checks in the given states; no history. ``conn`` must come from
    the store's pool, whose jsonb codec takes dicts."""
    account_id = await insert_account(conn)
    identifier = identifier or secrets.token_urlsafe(9)
    monitor_id = await conn.fetchval(
        """INSERT INTO monitors (account_id, identifier, alias, url, scheme, host)
           VALUES ($1, $2, $3, $4, 'https', $5) RETURNING id""",
        account_id, identifier, alias, f"https://{host}/", host,
    )
    uptime_id = await conn.fetchval(
        """INSERT INTO checks (monitor_id, kind, interval_s, is_enabled, status, error,
                               last_check_at, meta)
           VALUES ($1, 'uptime', $2, $3, $4, $5, $6, $7::jsonb) RETURNING id""",
        monitor_id, interval, uptime_enabled, uptime_status, uptime_error, last_check_at,
        {"http_status_code": 200} if uptime_meta is None else uptime_meta,
    )
    meta = certificate_meta if certificate_meta is not None else {
        "issuer": "R11",
        "signature_algorithm": "sha256WithRSAEncryption",
        "is_self_signed": False,
        "valid_from": "2026-01-01 00:00:00",
        "valid_to": "2099-04-01 12:00:00",
    }
    certificate_id = await conn.fetchval(
        """INSERT INTO checks (monitor_id, kind, interval_s, is_enabled, status, error,
                               last_check_at, meta)
           VALUES ($1, 'certificate_health', 3600, $2, $3, $4, $5, $6::jsonb) RETURNING id""",
        monitor_id, certificate_enabled, certificate_status, certificate_error, last_check_at,
        meta,
    )
    return Site(monitor_id, identifier, uptime_id, certificate_id)


def certificate_valid_to(now: datetime) -> str:
    """The seeded certificate's expiry: 64 days and a bit after ``now``."""
    return (now + timedelta(days=64, hours=3)).strftime("%Y-%m-%d %H:%M:%S")


def certificate_meta(now: datetime) -> dict[str, Any]:
    return {
        "issuer": "R11",
        "signature_algorithm": "sha256WithRSAEncryption",
        "is_self_signed": False,
        "valid_from": (now - timedelta(days=26)).strftime("%Y-%m-%d %H:%M:%S"),
        "valid_to": certificate_valid_to(now),
    }


def utc_midnight(ts: datetime) -> datetime:
    return datetime(ts.year, ts.month, ts.day, tzinfo=UTC)


async def insert_rollups(
    conn: asyncpg.Connection, check_id: int, first_hour: datetime, last_hour: datetime,
    *, probes: int = 120, skip_days: tuple[datetime, ...] = (),
) -> None:
    skipped = {d.date() for d in skip_days}
    hours = []
    h = first_hour
    while h <= last_hour:
        if h.date() not in skipped:
            hours.append(h)
        h += timedelta(hours=1)
    await conn.executemany(
        """INSERT INTO check_rollups_hourly
               (check_id, hour, probes, responses, failures, response_ms_sum, response_ms_max)
           VALUES ($1, $2, $3::int, $3::int, 0, $3::int * 150.0, 300)""",
        [(check_id, hour, probes) for hour in hours],
    )


async def insert_outage(
    conn: asyncpg.Connection, check_id: int, started_at: datetime, ended_at: datetime | None,
    *, http_status_code: int | None = 503, error: str | None = "HTTP 503",
) -> None:
    await conn.execute(
        """INSERT INTO outages (check_id, started_at, ended_at, http_status_code, error,
                                detected_by, verified_via, alerted)
           VALUES ($1, $2, $3, $4, $5, 'local', 'local', true)""",
        check_id, started_at, ended_at, http_status_code, error,
    )


def response_ms(minute: int) -> float:
    """A response time that rises and falls over the day: 120 to 280 ms."""
    return 200.0 + 80.0 * math.sin(minute / 180.0)


async def insert_probe_results(conn: asyncpg.Connection, check_id: int, now: datetime) -> None:
    rows: list[tuple[Any, ...]] = []
    for minute in range(25 * 60):
        at = now - timedelta(minutes=minute)
        rows.append((check_id, at, 1, 0, 200, response_ms(minute), "local", False, None))
    # No response: no time to plot.
    rows.append((check_id, now - timedelta(minutes=7, seconds=30), 1, 2, None, 10000.0,
                 "local", False, "timeout"))
    # A certificate probe of the same check id would never be plotted either.
    rows.append((check_id, now - timedelta(minutes=3, seconds=10), 2, 0, None, 99999.0,
                 "local", False, None))
    await conn.executemany(
        """INSERT INTO probe_results (check_id, at, kind, outcome, status_code, total_ms,
                                      region, confirmation, error)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
        rows,
    )


async def seed_site(
    pool: asyncpg.Pool, now: datetime, *, ongoing: bool = False, **monitor: Any
) -> Site:
    """A monitor with 100 days of history up to ``now`` (see the module docstring)."""
    async with pool.acquire() as conn, conn.transaction():
        if ongoing:
            monitor.setdefault("uptime_status", "down")
            monitor.setdefault("uptime_error", "HTTP 503")
        monitor.setdefault("certificate_meta", certificate_meta(now))
        if ongoing:
            monitor.setdefault("uptime_meta", {"http_status_code": 503})
        site = await insert_monitor(conn, last_check_at=now - timedelta(seconds=20), **monitor)
        start = now - timedelta(days=100)
        for check_id in (site.uptime_id, site.certificate_id):
            await conn.execute(
                "INSERT INTO check_periods (check_id, started_at) VALUES ($1, $2)",
                check_id, start,
            )
        this_hour = now.replace(minute=0, second=0, microsecond=0)
        await insert_rollups(
            conn, site.uptime_id, this_hour - timedelta(days=100), this_hour,
            skip_days=(utc_midnight(now - timedelta(days=40)),),
        )
        # Ends at noon UTC three days ago: inside one UTC day (one bar) whatever the time of
        # day the tests run; ending at now - 3 d, it split across two bars after midnight.
        noon = utc_midnight(now - timedelta(days=3)) + timedelta(hours=12)
        await insert_outage(conn, site.uptime_id, noon - timedelta(hours=1), noon)
        before_midnight = utc_midnight(now - timedelta(days=10)) - timedelta(minutes=20)
        await insert_outage(conn, site.uptime_id, before_midnight,
                            before_midnight + timedelta(minutes=50), http_status_code=None,
                            error="connection refused")
        if ongoing:
            await insert_outage(conn, site.uptime_id, now - timedelta(minutes=30), None)
        await insert_probe_results(conn, site.uptime_id, now)
    return site
