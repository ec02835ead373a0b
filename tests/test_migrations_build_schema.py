"""Migrations build the schema, record themselves, and are safe to run twice or at once."""

import asyncio

import asyncpg

from engine.db import migrate

EXPECTED_TABLES = {
    "accounts", "monitors", "checks", "check_periods", "outages", "probe_results",
    "check_rollups_hourly", "nodes", "webhook_events", "schema_migrations",
}


async def test_template_has_every_table_and_records_versions(db_dsn: str) -> None:
    conn = await asyncpg.connect(db_dsn)
    try:
        tables = {
            r["tablename"]
            for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")
        }
        assert EXPECTED_TABLES <= tables
        rows = await conn.fetch("SELECT version FROM schema_migrations ORDER BY 1")
        versions = [r["version"] for r in rows]
        assert versions == [v for v, _, _ in migrate.available()]
        # probe_results is partitioned, with a default partition as a safety net.
        kind = await conn.fetchval("SELECT relkind FROM pg_class WHERE relname = 'probe_results'")
        assert kind == b"p" or kind == "p"
    finally:
        await conn.close()


async def test_reapplying_is_a_no_op(db_dsn: str) -> None:
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await migrate.apply(conn) == []
    finally:
        await conn.close()


async def test_concurrent_first_runs_do_not_race(pg_admin_dsn: str) -> None:
    admin = await asyncpg.connect(pg_admin_dsn)
    name = "t_migrate_race"
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        dsn = pg_admin_dsn.rsplit("/", 1)[0] + "/" + name
        if "?" in pg_admin_dsn:
            base, query = pg_admin_dsn.split("?", 1)
            dsn = base.rsplit("/", 1)[0] + "/" + name + "?" + query
        conns = [await asyncpg.connect(dsn) for _ in range(3)]
        try:
            results = await asyncio.gather(*(migrate.apply(c) for c in conns))
        finally:
            for c in conns:
                await c.close()
        applied = [name for r in results for name in r]
        assert sorted(applied) == sorted(n for _, n, _ in migrate.available())
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
