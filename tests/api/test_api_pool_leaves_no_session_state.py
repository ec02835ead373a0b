"""The pool skips asyncpg's reset round trip on release, yet no session state reaches the
next user of a connection: LISTEN and session advisory locks still get the full reset, and
an open transaction is rolled back."""

from __future__ import annotations

import asyncpg
import pytest

from engine.db import migrate
from engine.db.pool import create_pool


async def _the_connection(pool: asyncpg.Pool) -> asyncpg.Connection:
    async with pool.acquire() as conn:
        raw: asyncpg.Connection = conn._con
    return raw


async def test_a_plain_read_is_released_without_a_round_trip(db_dsn: str) -> None:
    pool = await create_pool(db_dsn, min_size=1, max_size=1)
    try:
        raw = await _the_connection(pool)
        sent: list[str] = []
        raw.add_query_logger(lambda record: sent.append(record.query))
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT 1") == 1
        async with pool.acquire() as conn:
            async with conn.transaction():
                await conn.fetchval("SELECT 2")
        assert not any("RESET" in q or "UNLISTEN" in q for q in sent), sent
    finally:
        await pool.close()


# asyncpg warns about the listener left behind: that is the case under test.
@pytest.mark.filterwarnings("ignore::asyncpg.InterfaceWarning")
async def test_a_listening_connection_is_reset_before_reuse(db_dsn: str) -> None:
    pool = await create_pool(db_dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            await conn.add_listener("upwatch_test", lambda *_: None)
            assert await conn.fetch("SELECT pg_listening_channels()")
        async with pool.acquire() as conn:
            assert await conn.fetch("SELECT pg_listening_channels()") == []
            # The reset happened once: the next plain release skips it again.
            assert not conn._con.upwatch_session_state
    finally:
        await pool.close()


async def test_the_migration_lock_never_stays_on_a_pooled_connection(db_dsn: str) -> None:
    pool = await create_pool(db_dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            await migrate.apply(conn)
            # As if the unlock had never run (a cancelled start-up).
            await conn.execute("SELECT pg_advisory_lock(42)")
        async with pool.acquire() as conn:
            held = await conn.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                " AND pid = pg_backend_pid()")
            assert held == 0
    finally:
        await pool.close()


async def test_a_transaction_left_open_is_rolled_back(db_dsn: str) -> None:
    pool = await create_pool(db_dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            tx = conn.transaction()
            await tx.start()
            await conn.execute("CREATE TABLE left_open (x int)")
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT to_regclass('left_open')") is None
    finally:
        await pool.close()
