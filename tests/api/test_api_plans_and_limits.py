"""The account's plan decides the allowed intervals and the monitor limit."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.runtime.settings import Plan, Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data", allow_private_targets=True, port=0,
        base_url="http://127.0.0.1:8080", rate_limit_per_second=0,
        plans={"default": Plan(allowed_intervals=[300, 900, 7200], monitor_limit=2),
               "pro": Plan()},
    )


async def test_the_account_shows_its_plan(client: aiohttp.ClientSession) -> None:
    async with client.get("/webapi/account") as r:
        body = await r.json()
    assert (body["plan"], body["allowed_intervals"], body["monitor_limit"]) == (
        "default", [300, 900, 7200], 2)


async def test_intervals_outside_the_plan_are_422(client: aiohttp.ClientSession) -> None:
    async with client.post("/webapi/monitors",
                           json={"url": "https://a.example", "interval": 30}) as r:
        assert r.status == 422
        assert (await r.json())["errors"] == {
            "interval": ["The interval must be one of: 300, 900, 7200."]}
    async with client.post("/webapi/monitors", json={"url": "https://a.example"}) as r:
        assert r.status == 201
        m = await r.json()
    # Defaults adapt to the plan: the shortest allowed, and the closest to hourly above it.
    assert m["checks"]["uptime"]["interval"] == 300
    assert m["checks"]["certificate_health"]["interval"] == 7200
    async with client.put(f"/webapi/checks/{m['checks']['uptime']['id']}",
                          json={"interval": 60}) as r:
        assert r.status == 422
        assert list((await r.json())["errors"]) == ["interval"]


async def test_the_monitor_limit_is_422_under_monitor_limit(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    for host in ("a.example", "b.example"):
        async with client.post("/webapi/monitors", json={"url": f"https://{host}"}) as r:
            assert r.status == 201
    async with client.post("/webapi/monitors", json={"url": "https://c.example"}) as r:
        assert r.status == 422
        body = await r.json()
    assert body == {
        "message": "The account has reached its limit of 2 monitors.",
        "errors": {"monitor_limit": ["The account has reached its limit of 2 monitors."]},
    }
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM monitors") == 2
        assert await conn.fetchval("SELECT count(*) FROM checks") == 6  # with the domain checks


async def test_concurrent_creates_cannot_pass_the_limit(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    async def create(i: int) -> int:
        async with client.post("/webapi/monitors", json={"url": f"https://h{i}.example"}) as r:
            return r.status

    statuses = await asyncio.gather(*(create(i) for i in range(8)))
    assert sorted(statuses) == [201, 201] + [422] * 6
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM monitors") == 2


async def test_another_plan_has_its_own_rules(api: str, store: Store) -> None:
    _, token = await store.create_account("big", plan="pro")
    async with aiohttp.ClientSession(
        base_url=api, headers={"Authorization": f"Bearer {token}"}
    ) as s:
        for i in range(3):
            async with s.post("/webapi/monitors",
                              json={"url": f"https://p{i}.example", "interval": 30}) as r:
                assert r.status == 201
                body: dict[str, Any] = await r.json()
        assert body["checks"]["certificate_health"]["interval"] == 3600
