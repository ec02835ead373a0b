"""Closing the store bounds the wait for connections still in use: a query stuck behind a
lock cannot keep the process from stopping."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from engine.db.store import Store


async def test_closing_the_store_closes_a_connection_still_in_use(db_dsn: str) -> None:
    store = await Store.connect(db_dsn, min_size=1, max_size=2)
    conn = await store.pool.acquire()
    # A query that would run far past the close: it is stuck, and never given back.
    stuck = asyncio.ensure_future(conn.execute("SELECT pg_sleep(30)"))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    await store.close(timeout=0.5)
    took = time.monotonic() - started
    assert 0.4 < took < 5.0, took
    # The stuck query ends with the connection closed under it, not 30 s later.
    done, _ = await asyncio.wait({stuck}, timeout=5)
    assert stuck in done
    assert isinstance(stuck.exception(), asyncpg.ConnectionDoesNotExistError)
