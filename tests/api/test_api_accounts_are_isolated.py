"""One account never sees or changes another's monitors or checks: a 404 like a missing one."""

from __future__ import annotations

from typing import Any

import aiohttp

from engine.db.store import Store


async def test_another_accounts_monitor_and_checks_are_not_found(
    client: aiohttp.ClientSession, api: str, store: Store,
) -> None:
    async with client.post("/webapi/monitors",
                           json={"url": "https://a.example", "alias": "A's"}) as r:
        mine: dict[str, Any] = await r.json()
    _, other_token = await store.create_account("intruder")
    mid = mine["id"]
    cids = [mine["checks"][k]["id"] for k in ("uptime", "certificate_health")]
    async with store.pool.acquire() as conn:
        before = await conn.fetch("SELECT * FROM checks ORDER BY id")
        before_monitors = await conn.fetch("SELECT * FROM monitors ORDER BY id")

    attempts = [
        ("GET", f"/webapi/monitors/{mid}", None, "Monitor not found."),
        ("PUT", f"/webapi/monitors/{mid}", {"alias": "pwned", "url": "https://evil.example"},
         "Monitor not found."),
        ("DELETE", f"/webapi/monitors/{mid}", None, "Monitor not found."),
        ("GET", f"/webapi/monitors/{mid}/statistics", None, "Monitor not found."),
    ]
    for cid in cids:
        attempts += [
            ("PUT", f"/webapi/checks/{cid}", {"interval": 60}, "Check not found."),
            ("POST", f"/webapi/checks/{cid}/disable", None, "Check not found."),
            ("POST", f"/webapi/checks/{cid}/enable", None, "Check not found."),
        ]
    async with aiohttp.ClientSession(
        base_url=api, headers={"Authorization": f"Bearer {other_token}"}
    ) as intruder:
        async with intruder.get("/webapi/monitors") as r:
            assert await r.json() == []
        for method, path, body, message in attempts:
            async with intruder.request(method, path, json=body) as r:
                assert r.status == 404, (method, path)
                assert await r.json() == {"message": message}
            # Exactly what a missing id answers.
            missing = path.replace(f"/{mid}", "/999999").replace(f"/{cids[0]}", "/999999")
            missing = missing.replace(f"/{cids[1]}", "/999999")
            async with intruder.request(method, missing, json=body) as r:
                assert r.status == 404
                assert await r.json() == {"message": message}

    async with store.pool.acquire() as conn:
        assert await conn.fetch("SELECT * FROM checks ORDER BY id") == before
        assert await conn.fetch("SELECT * FROM monitors ORDER BY id") == before_monitors
    async with client.get("/webapi/monitors") as r:
        listed = await r.json()
    assert [m["alias"] for m in listed] == ["A's"]


async def test_each_account_lists_only_its_own(
    client: aiohttp.ClientSession, api: str, store: Store,
) -> None:
    _, other_token = await store.create_account("other")
    async with aiohttp.ClientSession(
        base_url=api, headers={"Authorization": f"Bearer {other_token}"}
    ) as other:
        for i in range(3):
            async with other.post("/webapi/monitors", json={"url": f"https://o{i}.example"}) as r:
                assert r.status == 201
        async with client.post("/webapi/monitors", json={"url": "https://mine.example"}) as r:
            assert r.status == 201
        async with other.get("/webapi/monitors") as r:
            assert [m["host"] for m in await r.json()] == [
                "o0.example", "o1.example", "o2.example"]
        async with other.get("/webapi/account") as r:
            assert (await r.json())["name"] == "other"
    async with client.get("/webapi/monitors") as r:
        assert [m["host"] for m in await r.json()] == ["mine.example"]
