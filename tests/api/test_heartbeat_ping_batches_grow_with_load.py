"""Ping group commit: a ping is written at once when no write runs, and the pings that come
while a write runs go together in the next write; a batch's trim keeps each heartbeat's
newest pings, those of the batch included."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

import aiohttp

from engine.db.heartbeats import IncomingPing
from engine.db.store import Store
from engine.domain import heartbeat as hb
from engine.web.pings import PingBatcher
from tests.support.wait import wait_until


def _ping(ping_uuid: str, body: str | None = None) -> IncomingPing:
    return IncomingPing(ping_uuid, hb.Ping(hb.LOG, datetime.now(UTC)), "POST", None, body,
                        False)


async def test_pings_offered_during_a_write_go_together_in_the_next() -> None:
    writes: list[list[str]] = []
    release = asyncio.Event()

    async def record(batch: Sequence[IncomingPing]) -> list[bool]:
        writes.append([p.ping_uuid for p in batch])
        if len(writes) == 1:
            await release.wait()
        return [p.ping_uuid != "unknown" for p in batch]

    batcher = PingBatcher(record)
    first = batcher.offer(_ping("a"))
    await wait_until(lambda: len(writes) == 1, what="the first write", timeout=5)
    rest = [batcher.offer(_ping(u)) for u in ("b", "unknown", "c")]
    await asyncio.sleep(0)
    assert writes == [["a"]] and not any(f.done() for f in [first, *rest])
    release.set()
    assert await asyncio.wait_for(asyncio.gather(first, *rest), 5) == [True, True, False, True]
    assert writes == [["a"], ["b", "unknown", "c"]]


async def test_a_batch_keeps_each_heartbeats_newest_pings_its_own_included(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    async with client.post("/webapi/monitors", json={
            "type": "heartbeat", "alias": "job", "period": 3600, "grace": 300}) as r:
        assert r.status == 201, await r.text()
        m = await r.json()
    cid, pid = m["checks"]["heartbeat"]["id"], m["ping_url"].rsplit("/", 1)[1]

    async def bodies() -> list[str]:
        async with store.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT body FROM heartbeat_pings WHERE check_id = $1 ORDER BY id", cid)
        return [row["body"] for row in rows]

    found = await store.record_pings([_ping(pid, f"line {i}") for i in range(5)], keep=3)
    assert found == [True] * 5
    assert await bodies() == ["line 2", "line 3", "line 4"]
    await store.record_pings([_ping(pid, "line 5"), _ping(pid, "line 6")], keep=3)
    assert await bodies() == ["line 4", "line 5", "line 6"]
    row = await store.heartbeat_beat(cid)
    assert row is not None and row.body == "line 6"
