"""A storm of channel tests from one account, to a host that accepts and never answers,
against a real ``upwatch run`` process: another account's API call, a public status page
and a badge still answer at once; the storm gets 429s naming the limit, and the silent host
sees only the account's two tests at a time."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp

from engine.db.store import Store
from tests.support.instances import Instance, RegionalTarget
from tests.support.notify_support import SilentHost
from tests.support.wait import wait_until

BASE = "/webapi/notification-channels"
ENV = {"UPWATCH_NOTIFY_TIMEOUT": "10", "UPWATCH_TIME_SCALE": "0.05"}
# What "at once" means here (the issue measured 43 s with twelve tests).
BOUND_S = 0.5


async def _timed_get(http: aiohttp.ClientSession, path: str) -> tuple[int, float]:
    started = time.monotonic()
    async with http.get(path) as r:
        await r.read()
        return r.status, time.monotonic() - started


async def test_a_test_storm_to_a_silent_host_leaves_other_accounts_and_pages_answering(
    db_dsn: str, tmp_path: Path, store: Store
) -> None:
    _, token_a = await store.create_account("storm")
    _, token_b = await store.create_account("bystander")
    async with RegionalTarget() as site, SilentHost() as host:
        inst = await Instance(db_dsn, tmp_path, env=ENV).start()
        try:
            async with aiohttp.ClientSession(
                base_url=inst.base_url, headers={"Authorization": f"Bearer {token_a}"}
            ) as a, aiohttp.ClientSession(
                base_url=inst.base_url, headers={"Authorization": f"Bearer {token_b}"}
            ) as b, aiohttp.ClientSession(base_url=inst.base_url) as public:
                async with b.post("/webapi/monitors", json={"url": site.url("/")}) as r:
                    assert r.status == 201, await r.text()
                    identifier = (await r.json())["identifier"]
                channels = []
                for i in range(4):
                    async with a.post(BASE, json={"name": f"h{i}",
                                                  "url": host.json_url(f"/h{i}")}) as r:
                        assert r.status == 201, await r.text()
                        channels.append((await r.json())["id"])

                async def press(cid: int) -> tuple[int, Any, str | None]:
                    async with a.post(f"{BASE}/{cid}/test") as r:
                        return r.status, await r.json(), r.headers.get("Retry-After")

                storm = [asyncio.create_task(press(channels[i % 4])) for i in range(24)]
                await wait_until(lambda: host.accepted >= 2, what="the storm's connections")
                # The refused ones have answered already; two tests hang on the host.
                await wait_until(lambda: sum(t.done() for t in storm) >= 22,
                                 what="the refused tests' answers")
                for path, client in (("/webapi/monitors", b), (f"/{identifier}", public),
                                     (f"/{identifier}/badge.svg", public)):
                    status, took = await _timed_get(client, path)
                    assert status == 200, path
                    assert took < BOUND_S, f"{path} took {took:.2f} s during the storm"
                answers = await asyncio.gather(*storm)
        finally:
            await inst.stop()
    refused = [x for x in answers if x[0] == 429]
    tried = [x for x in answers if x[0] == 200]
    assert len(tried) == 2 and all(x[1]["delivered"] is False for x in tried)
    assert len(refused) == 22
    assert {x[1]["limit"] for x in refused} <= {"channel", "account"}
    assert all(x[2] is not None and int(x[2]) >= 1 for x in refused)
    assert host.accepted == 2
