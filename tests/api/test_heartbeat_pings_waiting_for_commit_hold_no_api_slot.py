"""A ping waiting for its group commit holds none of the API's ``api_concurrency`` slots: the
API answers while pings wait on a slow write, and the pings are all answered and stored once
it ends (so a batch is never capped at the number of slots)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.runtime.settings import Settings
from tests.support.wait import wait_until

LIMIT = 2
PINGS = 3 * LIMIT


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", allow_private_targets=True, port=0,
                    base_url="http://127.0.0.1:8080", rate_limit_per_second=0,
                    api_concurrency=LIMIT)


async def test_pings_waiting_for_a_slow_write_leave_the_api_answering(
    api: str, client: aiohttp.ClientSession, store: Store,
) -> None:
    async with client.post("/webapi/monitors", json={
            "type": "heartbeat", "alias": "job", "period": 3600, "grace": 300}) as r:
        assert r.status == 201, await r.text()
        m: dict[str, Any] = await r.json()
    cid, pid = m["checks"]["heartbeat"]["id"], m["ping_url"].rsplit("/", 1)[1]

    async def blocked_writes() -> int:
        return int(await store.pool.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE '%FOR UPDATE OF h%'"))

    async with aiohttp.ClientSession(base_url=api) as anon, store.pool.acquire() as holder:
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT 1 FROM heartbeats WHERE check_id = $1 FOR UPDATE", cid)

        async def ping() -> int:
            async with anon.get(f"/ping/{pid}") as resp:
                return resp.status

        calls = [asyncio.create_task(ping()) for _ in range(PINGS)]
        try:
            await wait_until(blocked_writes, what="a ping batch waiting on the row lock")
            async with asyncio.timeout(5), client.get("/webapi/monitors") as listed:
                assert listed.status == 200
            assert not any(c.done() for c in calls)  # still waiting for their commit
        finally:
            await tx.rollback()
        async with asyncio.timeout(10):
            assert await asyncio.gather(*calls) == [200] * PINGS
    stored = await store.pool.fetchval(
        "SELECT count(*) FROM heartbeat_pings WHERE check_id = $1", cid)
    assert stored == PINGS
