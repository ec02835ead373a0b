"""A ping answered 200 is in the database: ``kill -9`` of the service right after the
answer loses none of them."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from engine.db.store import Store
from tests.support.instances import Instance, fetch


async def test_pings_answered_200_survive_a_kill_at_once(
    store: Store, db_dsn: str, tmp_path: Path,
) -> None:
    _, token = await store.create_account("acme")
    node = await Instance(db_dsn, tmp_path).start()
    try:
        headers = {"Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.post(f"{node.base_url}/webapi/monitors", json={
                    "type": "heartbeat", "alias": "job", "period": 3600,
                    "grace": 600}) as r:
                assert r.status == 201, await r.text()
                monitor = await r.json()
        ping_url = f"{node.base_url}/ping/" + monitor["ping_url"].rsplit("/", 1)[1]
        answered = 0
        async with aiohttp.ClientSession() as anon:
            for i in range(20):
                async with anon.post(ping_url + "/log", data=f"line {i}".encode()) as r:
                    if r.status == 200:
                        answered += 1
        # At once: no stop, no flush.
        await node.kill()
    finally:
        await node.kill()
    rows = await fetch(db_dsn, "SELECT body FROM heartbeat_pings WHERE check_id = $1",
                       monitor["checks"]["heartbeat"]["id"])
    assert answered == 20
    assert sorted(r["body"] for r in rows) == sorted(f"line {i}" for i in range(20))
