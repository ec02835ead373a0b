"""A flooding client: its account gets 429 with ``Retry-After`` once its bucket is empty,
the refused requests write nothing, and other accounts are not slowed. Nothing a client
controls (``X-Forwarded-For``, ``Forwarded``, ``X-Real-IP``, a rotated token) moves it to a
fresh bucket: the bucket belongs to the account, not to an address or a token."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.runtime.settings import Settings

BURST = 3
RATE = 0.01  # one request per 100 s after the burst: no refill during the test
TOO_MANY = {"message": "Too many requests."}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", allow_private_targets=True, port=0,
                    base_url="http://127.0.0.1:8080",
                    rate_limit_per_second=RATE, rate_limit_burst=BURST)


def session(api: str, token: str) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(base_url=api, headers={"Authorization": f"Bearer {token}"})


async def status_of(s: aiohttp.ClientSession, method: str, path: str, **kw: Any) -> int:
    async with s.request(method, path, **kw) as r:
        if r.status == 429:
            assert r.headers["Content-Type"] == "application/json"
            assert await r.json() == TOO_MANY
            retry_after = r.headers["Retry-After"]
            assert retry_after.isdigit() and 1 <= int(retry_after) <= int(1 / RATE)
        return r.status


async def test_a_flood_gets_the_burst_then_429s_and_writes_nothing_more(
    api: str, store: Store, account: tuple[Any, str]
) -> None:
    _, token = account
    async with session(api, token) as flood:
        statuses = await asyncio.gather(*(
            status_of(flood, "POST", "/webapi/monitors", json={"url": f"https://f{i}.example/"})
            for i in range(40)
        ))
    assert sorted(statuses) == [201] * BURST + [429] * (40 - BURST)
    assert await store.pool.fetchval("SELECT count(*) FROM monitors") == BURST


async def test_one_accounts_flood_does_not_limit_another(
    api: str, store: Store, account: tuple[Any, str]
) -> None:
    _, flooder = account
    _, bystander = await store.create_account("bystander")
    async with session(api, flooder) as flood, session(api, bystander) as calm:
        statuses = await asyncio.gather(
            *(status_of(flood, "GET", "/webapi/monitors") for _ in range(30)))
        assert statuses.count(429) == 30 - BURST
        # The bystander's whole burst is still there.
        for _ in range(BURST):
            assert await status_of(calm, "GET", "/webapi/monitors") == 200
        assert await status_of(calm, "GET", "/webapi/monitors") == 429


async def test_spoofed_client_addresses_and_a_new_token_do_not_reset_the_bucket(
    api: str, store: Store, account: tuple[Any, str]
) -> None:
    acc, token = account
    async with session(api, token) as s:
        for _ in range(BURST):
            assert await status_of(s, "GET", "/webapi/account") == 200
        for i in range(5):
            spoofed = {
                "X-Forwarded-For": f"203.0.113.{i}",
                "Forwarded": f"for=198.51.100.{i}",
                "X-Real-IP": f"192.0.2.{i}",
                "X-Client-IP": f"192.0.2.{i}",
            }
            assert await status_of(s, "GET", "/webapi/account", headers=spoofed) == 429
    rotated = await store.rotate_token(acc.id)
    assert rotated is not None
    async with session(api, rotated[1]) as fresh_token:
        assert await status_of(fresh_token, "GET", "/webapi/account") == 429


async def test_public_endpoints_and_refused_credentials_are_not_limited_by_an_account(
    api: str, account: tuple[Any, str]
) -> None:
    _, token = account
    async with session(api, token) as s:
        for _ in range(BURST):
            assert await status_of(s, "GET", "/webapi/monitors") == 200
        assert await status_of(s, "GET", "/webapi/monitors") == 429
    async with aiohttp.ClientSession(base_url=api) as anonymous:
        for path in ("/healthz", "/webapi/openapi.json", "/metrics"):
            assert await status_of(anonymous, "GET", path) == 200
        # A wrong token is a 401, not a 429 that would tell it apart from the real one.
        assert await status_of(anonymous, "GET", "/webapi/monitors",
                               headers={"Authorization": "Bearer nope"}) == 401


async def test_the_bucket_refills_and_the_account_gets_back_in(
    store: Store, tmp_path: Path
) -> None:
    """With a fast refill (20 a second) the account is back within Retry-After."""
    from aiohttp import web

    from engine.web.app import create_app

    fast = Settings(data_dir=tmp_path / "data", allow_private_targets=True, port=0,
                    base_url="http://127.0.0.1:8080",
                    rate_limit_per_second=20, rate_limit_burst=2)
    _, token = await store.create_account("refill")
    runner = web.AppRunner(create_app(store, fast))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with session(f"http://127.0.0.1:{port}", token) as s:
            statuses = [await status_of(s, "GET", "/webapi/account") for _ in range(3)]
            assert statuses == [200, 200, 429]
            async with s.get("/webapi/account") as r:
                retry_after = int(r.headers.get("Retry-After", "1"))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + retry_after + 1
            while await status_of(s, "GET", "/webapi/account") == 429:
                assert loop.time() < deadline, "still limited after Retry-After"
                await asyncio.sleep(0.02)
    finally:
        await runner.cleanup()
