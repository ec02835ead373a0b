"""GET and PUT /webapi/account: the account and its webhook URL."""

from __future__ import annotations

from typing import Any

import aiohttp

from engine.db.store import Store


async def test_get_shows_the_account_and_its_plan(
    client: aiohttp.ClientSession, account: tuple[Any, str],
) -> None:
    acc, _ = account
    async with client.get("/webapi/account") as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "application/json"
        assert await r.json() == {
            "id": acc.id, "name": "test", "plan": "default", "webhook_url": None,
            "allowed_intervals": [30, 60, 120, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400],
            "monitor_limit": 10000,
        }


async def test_put_sets_normalises_keeps_and_clears_the_webhook_url(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str],
) -> None:
    acc, _ = account
    async with client.put("/webapi/account",
                          json={"webhook_url": "HTTPS://Hooks.Example:443/in?k=v"}) as r:
        assert r.status == 200
        body = await r.json()
    assert body["webhook_url"] == "https://hooks.example/in?k=v"
    assert set(body) == {"id", "name", "plan", "webhook_url", "allowed_intervals",
                         "monitor_limit"}
    for keep in ({}, {"other": 1}):
        async with client.put("/webapi/account", json=keep) as r:
            assert (await r.json())["webhook_url"] == "https://hooks.example/in?k=v"
    async with client.put("/webapi/account", json={"webhook_url": None}) as r:
        assert r.status == 200
        assert (await r.json())["webhook_url"] is None
    fresh = await store.get_account(acc.id)
    assert fresh is not None and fresh.webhook_url is None


async def test_bad_webhook_urls_are_422_and_change_nothing(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str],
) -> None:
    acc, _ = account
    async with client.put("/webapi/account", json={"webhook_url": "https://ok.example/"}) as r:
        assert r.status == 200
    bad = [
        "ftp://hooks.example/", "hooks.example/in", "https://user:pw@hooks.example/",
        "https://hooks.example/" + "a" * 2048, "https://hooks.example/\r\nX-Injected: 1",
        "https://hooks.example\r\n/", "", 42, ["https://hooks.example"], {"u": 1}, True,
    ]
    for value in bad:
        async with client.put("/webapi/account", json={"webhook_url": value}) as r:
            assert r.status == 422, value
            body = await r.json()
        assert list(body["errors"]) == ["webhook_url"], value
        assert body["message"] == body["errors"]["webhook_url"][0]
    fresh = await store.get_account(acc.id)
    assert fresh is not None and fresh.webhook_url == "https://ok.example/"
