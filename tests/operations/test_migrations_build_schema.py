"""Migrations build the schema, record themselves, and are safe to run twice or at once."""

import asyncio

import asyncpg

from engine.db import migrate

EXPECTED_TABLES = {
    "accounts", "monitors", "checks", "check_periods", "outages", "probe_results",
    "check_rollups_hourly", "nodes", "webhook_events", "schema_migrations",
    "maintenance_windows", "maintenance_window_monitors", "check_certificates",  # 0005
    "check_phase_rollups_hourly", "check_phase_rollups_daily", "phase_rollup_progress",
    "notification_channels", "notification_events", "notification_deliveries",
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


async def test_rollup_sums_are_read_from_the_primary_key_alone(db_dsn: str) -> None:
    """0002: the rollups' primary key carries the summed columns, so 30 days of one check's
    figures are an index-only scan (a heap page per hourly row before, once vacuum has
    marked the pages all-visible), and the engine's upsert still finds its conflict target."""
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("""
            INSERT INTO accounts (name, token, token_sha256) VALUES ('a', 't', '\\x00');
            INSERT INTO monitors (account_id, identifier, alias, url, scheme, host)
            VALUES (1, 'ident-0000001', 'a', 'http://a/', 'http', 'a');
            INSERT INTO checks (monitor_id, kind, interval_s) VALUES (1, 'uptime', 30);
            INSERT INTO check_rollups_hourly (check_id, hour, probes, responses, response_ms_sum)
            SELECT 1, h, 120, 120, 4800
            FROM generate_series(now() - interval '30 days', now(), interval '1 hour') AS h;
        """)
        await conn.execute("ANALYZE check_rollups_hourly")
        await conn.execute("SET enable_seqscan = off; SET enable_bitmapscan = off")
        plan = "\n".join(r[0] for r in await conn.fetch(
            "EXPLAIN (COSTS OFF) SELECT sum(probes), sum(responses), sum(failures),"
            " sum(response_ms_sum) FROM check_rollups_hourly"
            " WHERE check_id = 1 AND hour >= now() - interval '30 days'"))
        # Before 0002 this could only be a heap scan: the sums were not in any index.
        assert "Index Only Scan using check_rollups_hourly_pkey" in plan, plan
        hour = await conn.fetchval("SELECT max(hour) FROM check_rollups_hourly")
        await conn.execute(
            "INSERT INTO check_rollups_hourly AS r (check_id, hour, probes) VALUES (1, $1, 1)"
            " ON CONFLICT (check_id, hour) DO UPDATE SET probes = r.probes + EXCLUDED.probes",
            hour)
        assert await conn.fetchval(
            "SELECT probes FROM check_rollups_hourly WHERE check_id = 1 AND hour = $1", hour) == 121
    finally:
        await conn.close()
