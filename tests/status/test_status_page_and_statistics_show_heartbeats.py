"""A heartbeat monitor on its status page, its badge and its statistics: down after a
failed run, with the reason in words and the outage counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from engine.db.store import Store
from tests.support.engine_support import fast_settings, running_engine, wait_status


async def test_a_down_heartbeat_shows_as_an_outage_everywhere(
    client: aiohttp.ClientSession, api: str, store: Store, tmp_path: Path,
    account: tuple[Any, str],
) -> None:
    async with client.post("/webapi/monitors", json={
            "type": "heartbeat", "alias": "nightly", "period": 86400, "grace": 3600}) as r:
        m = await r.json()
    cid = m["checks"]["heartbeat"]["id"]
    ping = "/ping/" + m["ping_url"].rsplit("/", 1)[1]
    async with aiohttp.ClientSession(base_url=api) as anon, running_engine(
            store, fast_settings(tmp_path)):
        async with anon.get(ping) as r:
            assert r.status == 200
        await wait_status(store, cid, "ok")
        async with anon.get(f"/{m['identifier']}.json") as r:
            page = await r.json()
        assert page["state"] == "operational"
        assert page["checks"]["heartbeat"]["last_ping_at"] is not None
        async with anon.post(ping + "/3", data=b"rsync failed") as r:
            assert r.status == 200
        await wait_status(store, cid, "down")
        async with anon.get(f"/{m['identifier']}.json") as r:
            page = await r.json()
        assert page["state"] == "outage"
        assert page["checks"]["heartbeat"]["reason"] == "job_failed"
        assert "rsync" not in str(page)  # the job's output stays the owner's
        async with anon.get(f"/{m['identifier']}/badge.svg") as r:
            assert "status: down" in await r.text()
        async with anon.get(f"/{m['identifier']}") as r:
            assert "Heartbeat" in await r.text()
    async with client.get(f"/webapi/monitors/{m['id']}/statistics") as r:
        stats = await r.json()
    assert stats["checks_run_30d"] >= 2
    assert stats["uptime_percentage_30d"] < 100.0
    [outage] = stats["outages"]
    assert outage["ended_at"] is None
