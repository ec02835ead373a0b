"""A fresh database for each bench run, and the set-based SQL that fills it.

Without ``--database-url`` an embedded PostgreSQL is started in the run's
temporary directory (fsync off: a benchmark measures our code, not the disk) and destroyed
at the end. With it, that server must let the role create databases: a database
``upwatch_bench_<random>`` is created there, migrated, and dropped at the end.

Seeding never goes through the API (50,000 API calls would take longer than the benchmark):
monitors and checks are inserted with one ``unnest`` statement each, history with
``generate_series``. Rows look like the API's own: monitors with url/scheme/host/port,
both checks per monitor, enabled checks with an open enabled period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

log = logging.getLogger(__name__)

SQL_INSERT_MONITORS = """
INSERT INTO monitors (account_id, identifier, alias, url, scheme, host, port)
SELECT $1, u.identifier, u.alias, u.url, u.scheme, u.host, u.port
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
     WITH ORDINALITY AS u(identifier, alias, url, scheme, host, port, ord)
ORDER BY u.ord
"""

# Both checks of every monitor of the account; enabled ones in ``status`` (default 'ok', as
# after a first probe: they then follow their phase instead of all being probed in the first
# second like new 'pending' checks), disabled ones 'paused'.
SQL_INSERT_CHECKS = """
INSERT INTO checks (monitor_id, kind, interval_s, notification_threshold_s, is_enabled, status,
                    last_check_at, meta)
SELECT m.id, k.kind, $2, 0, k.enabled,
       CASE WHEN k.enabled THEN $5::text ELSE 'paused' END,
       CASE WHEN k.enabled THEN now() END,
       CASE WHEN k.enabled AND k.kind = 'uptime' THEN '{"http_status_code": 200}'::jsonb
            ELSE '{}'::jsonb END
FROM monitors m
CROSS JOIN (VALUES ('uptime', $3::boolean), ('certificate_health', $4::boolean))
     AS k(kind, enabled)
WHERE m.account_id = $1
ORDER BY m.id, k.kind DESC
"""

SQL_OPEN_PERIODS = """
INSERT INTO check_periods (check_id, started_at)
SELECT c.id, now() - make_interval(days => $2)
FROM checks c JOIN monitors m ON m.id = c.monitor_id
WHERE m.account_id = $1 AND c.is_enabled
"""

# 30 days of hourly rollups for every uptime check of the account: 120 probes an hour (30 s).
SQL_ROLLUP_HISTORY = """
INSERT INTO check_rollups_hourly
    (check_id, hour, probes, responses, failures, response_ms_sum, response_ms_max)
SELECT c.id, h, 120, 120, 0, 120 * (40 + c.id % 20), 95
FROM checks c JOIN monitors m ON m.id = c.monitor_id
CROSS JOIN generate_series(date_trunc('hour', now() - make_interval(days => $2)),
                           date_trunc('hour', now()), interval '1 hour') AS h
WHERE m.account_id = $1 AND c.kind = 'uptime'
"""

# 30 days of raw 30 s results of one check (they land in the daily partitions).
SQL_RESULT_HISTORY = """
INSERT INTO probe_results (check_id, at, kind, outcome, status_code, total_ms, dns_ms,
                           connect_ms, tls_ms, ttfb_ms, region, confirmation, error)
SELECT $1, g, 1, 0, 200, 40 + random() * 20, 1 + random() * 4, 0.3, 2 + random() * 3,
       30 + random() * 10,
       'local', false, NULL
FROM generate_series(now() - make_interval(days => $2), now(), interval '30 seconds') AS g
"""

SQL_INSERT_OUTAGE = """
INSERT INTO outages (check_id, started_at, ended_at, http_status_code, error, detected_by,
                     verified_via, alerted)
VALUES ($1, $2, $3, $4, $5, 'local', 'local', true)
"""


def with_database(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def server_cpu_seconds(pgdata: Path) -> float | None:
    """User+system CPU seconds of an embedded server so far: the postmaster with its reaped
    children, plus every live child (backends, writers). None when it cannot be read."""
    try:
        master = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid, ppid = int(entry), int(fields[1])
        if pid == master:
            # utime, stime, cutime, cstime: fields 14-17 of stat (11-14 after the name)
            total += sum(int(x) for x in fields[11:15]) / CLK_TCK
        elif ppid == master:
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


class BenchDatabase:
    """``await start()`` gives the DSN of a fresh, migrated database; ``await close()``
    drops it (and the embedded server)."""

    def __init__(self, workdir: Path, *, external: str | None = None) -> None:
        self._workdir = workdir
        self._external = external
        self._server: Any = None
        self.admin_dsn = ""
        self.dsn = ""
        self.name = "upwatch_bench_" + secrets.token_hex(6)

    @property
    def embedded(self) -> bool:
        return self._external is None

    def cpu_seconds(self) -> float | None:
        """CPU seconds the embedded server has used (None for an external server)."""
        if self._server is None:
            return None
        return server_cpu_seconds(self._server.pgdata)

    async def set_durable(self, durable: bool) -> bool:
        """Turn the embedded server's fsync and synchronous commit on (or back off) for the
        phases that measure durable commits, as the service runs them. True when done;
        False for an external server, which keeps its own configuration."""
        if self._server is None:
            return False
        value = "on" if durable else "off"
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            for name in ("fsync", "synchronous_commit", "full_page_writes"):
                await conn.execute(f"ALTER SYSTEM SET {name} = {value}")
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()
        # Every backend rereads the file at its next command; a new session shows it done.
        for _ in range(100):
            conn = await asyncpg.connect(self.admin_dsn)
            try:
                if await conn.fetchval("SHOW fsync") == value:
                    return True
            finally:
                await conn.close()
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the bench database did not take fsync = {value}")

    async def start(self) -> str:
        from engine.db import migrate

        if self._external is not None:
            self.admin_dsn = self._external
        else:
            from engine.db.embedded import EmbeddedPostgres

            self._server = EmbeddedPostgres(self._workdir / "pg", durable=False)
            # The server inherits this process's CPU affinity (the parent pins itself to the
            # cores the engine does not use before it starts anything).
            await asyncio.to_thread(self._server.start)
            self.admin_dsn = self._server.dsn("postgres")
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            await conn.execute(f'CREATE DATABASE "{self.name}"')
        finally:
            await conn.close()
        self.dsn = with_database(self.admin_dsn, self.name)
        conn = await asyncpg.connect(self.dsn)
        try:
            await migrate.apply(conn)
        finally:
            await conn.close()
        return self.dsn

    async def close(self) -> None:
        """Drop the database and stop the embedded server; never raises."""
        if self.admin_dsn and self.dsn:
            try:
                conn = await asyncpg.connect(self.admin_dsn, timeout=10)
                try:
                    await conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)',
                                       timeout=30)
                finally:
                    await conn.close()
            except Exception as exc:
                log.warning("bench: could not drop database %s: %s", self.name, exc)
        if self._server is not None:
            server, self._server = self._server, None
            with contextlib.suppress(Exception):
                await asyncio.to_thread(server.destroy)
            shutil.rmtree(self._workdir / "pg", ignore_errors=True)


async def seed_monitors(
    conn: asyncpg.Connection,
    account_id: int,
    urls: list[str],
    *,
    uptime: bool = True,
    certificate: bool = False,
    interval: int = 30,
    status: str = "ok",
    period_days: int = 1,
) -> None:
    """Monitors for ``urls`` (in order) with both checks, in three statements."""
    identifiers, aliases, schemes, hosts, ports = [], [], [], [], []
    for i, url in enumerate(urls):
        parts = urlsplit(url)
        identifiers.append(secrets.token_urlsafe(9))
        aliases.append(f"bench {i}")
        schemes.append(parts.scheme)
        hosts.append(parts.hostname or "")
        ports.append(str(parts.port) if parts.port else "")
    async with conn.transaction():
        await conn.execute(SQL_INSERT_MONITORS, account_id, identifiers, aliases, urls,
                           schemes, hosts, ports)
        await conn.execute(SQL_INSERT_CHECKS, account_id, interval, uptime, certificate, status)
        await conn.execute(SQL_OPEN_PERIODS, account_id, period_days)
    await conn.execute("ANALYZE monitors; ANALYZE checks; ANALYZE check_periods")


async def seed_history(
    conn: asyncpg.Connection, account_id: int, stats_check_id: int, days: int = 30
) -> dict[str, int]:
    """Hourly rollups for every uptime check of the account, raw results of one check and a
    few closed outages, over ``days`` days. Returns row counts."""
    now = datetime.now(UTC)
    async with conn.transaction():
        rollups = await conn.execute(SQL_ROLLUP_HISTORY, account_id, days)
        results = await conn.execute(SQL_RESULT_HISTORY, stats_check_id, days)
        for k in range(5):
            started = now - timedelta(days=3 + 5 * k, minutes=17 * k)
            await conn.execute(
                SQL_INSERT_OUTAGE, stats_check_id, started,
                started + timedelta(minutes=4 + 3 * k),
                500 if k % 2 else None, "HTTP 500" if k % 2 else "timed out after 10 s",
            )
    await conn.execute("ANALYZE check_rollups_hourly; ANALYZE outages; ANALYZE probe_results")
    return {
        "rollup_rows": int(rollups.rsplit(" ", 1)[-1]),
        "result_rows": int(results.rsplit(" ", 1)[-1]),
        "outages": 5,
    }
