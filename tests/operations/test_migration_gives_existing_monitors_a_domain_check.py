"""Migration 0013 on a database that already has monitors: every monitor whose URL has a
host name gets an enabled domain_expiry check (IP literals none), and the CHECK constraints
take the new kind, status and events while keeping every value they had."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from engine.db import migrate


@pytest.fixture
async def fresh(pg_admin_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    admin = await asyncpg.connect(pg_admin_dsn)
    name = "t_migrate_0013"
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    base, _, query = pg_admin_dsn.partition("?")
    dsn = base.rsplit("/", 1)[0] + "/" + name + (f"?{query}" if query else "")
    conn = await asyncpg.connect(dsn)
    try:
        yield conn
    finally:
        await conn.close()
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


async def test_existing_monitors_get_the_check_and_constraints_widen(
        fresh: asyncpg.Connection) -> None:
    conn = fresh
    await conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY,"
                       " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
    for version, name, sql in migrate.available():
        if version >= 13:
            break
        await conn.execute(sql)
        await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2)", version, name)
    await conn.execute("""
        INSERT INTO accounts (name, token, token_sha256) VALUES ('a', 't', '\\x00');
        INSERT INTO monitors (account_id, identifier, alias, url, scheme, host) VALUES
            (1, 'ident-0000001', 'a', 'https://www.example.com/', 'https', 'www.example.com'),
            (1, 'ident-0000002', 'b', 'http://192.0.2.7/', 'http', '192.0.2.7'),
            (1, 'ident-0000003', 'c', 'https://[2001:db8::1]/', 'https', '2001:db8::1'),
            (1, 'ident-0000004', 'd', 'http://shop.example.co.uk:8080/', 'http',
             'shop.example.co.uk');
        INSERT INTO checks (monitor_id, kind, interval_s)
        SELECT id, 'uptime', 30 FROM monitors;
    """)
    applied = await migrate.apply(conn)
    assert applied[0] == "0013_domain_expiry.sql"
    rows = await conn.fetch(
        "SELECT m.identifier, c.is_enabled, c.status, c.interval_s FROM checks c"
        " JOIN monitors m ON m.id = c.monitor_id WHERE c.kind = 'domain_expiry'"
        " ORDER BY m.identifier")
    assert [tuple(r) for r in rows] == [
        ("ident-0000001", True, "pending", 14400),
        ("ident-0000004", True, "pending", 14400),
    ]
    # The constraints take the new values and still refuse others.
    await conn.execute("UPDATE checks SET status = 'unsupported' WHERE kind = 'domain_expiry'")
    await conn.execute("UPDATE checks SET status = 'degraded' WHERE kind = 'uptime'")
    with pytest.raises(asyncpg.CheckViolationError):
        await conn.execute("UPDATE checks SET status = 'exploded'")
    for event in ("domain_invalid", "downtime", "certificate_renewal_due"):
        await conn.execute(
            "INSERT INTO webhook_events (account_id, monitor_id, event, body)"
            " VALUES (1, 1, $1, '\\x7b7d')", event)
    with pytest.raises(asyncpg.CheckViolationError):
        await conn.execute("INSERT INTO webhook_events (account_id, monitor_id, event, body)"
                           " VALUES (1, 1, 'domain_sold', '\\x7b7d')")
    with pytest.raises(asyncpg.CheckViolationError):
        await conn.execute("INSERT INTO checks (monitor_id, kind, interval_s)"
                           " VALUES (2, 'whois', 30)")
