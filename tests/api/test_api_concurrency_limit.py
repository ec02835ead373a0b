"""At most ``api_concurrency`` requests are handled at once (the engine shares the event
loop: see ``engine/web/concurrency.py``), the rest wait their turn and are answered; a client
that sends its body slowly does not hold a turn; ``/healthz`` never waits."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.runtime.settings import Settings

LIMIT = 2


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", allow_private_targets=True, port=0,
                    base_url="http://127.0.0.1:8080", rate_limit_per_second=0,
                    api_concurrency=LIMIT)


async def test_requests_over_the_limit_wait_their_turn_and_are_answered(
    api: str, store: Store, account: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, token = account
    now = peak = 0
    release = asyncio.Event()
    real = store.authenticate

    async def slow_authenticate(t: str) -> Any:
        nonlocal now, peak
        now += 1
        peak = max(peak, now)
        try:
            await release.wait()
            return await real(t)
        finally:
            now -= 1

    monkeypatch.setattr(store, "authenticate", slow_authenticate)
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async def get() -> int:
            async with http.get(f"{api}/webapi/monitors") as r:
                return r.status

        calls = [asyncio.create_task(get()) for _ in range(3 * LIMIT)]
        async with asyncio.timeout(5):
            while now < LIMIT:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # the others had every chance to start
        assert now == LIMIT
        # Liveness does not wait behind them.
        async with asyncio.timeout(2), http.get(f"{api}/healthz") as r:
            assert r.status == 200
        release.set()
        statuses = await asyncio.wait_for(asyncio.gather(*calls), 5)
    assert statuses == [200] * (3 * LIMIT)
    assert peak == LIMIT


async def test_a_slow_body_does_not_hold_a_turn(api: str, account: tuple[Any, str]) -> None:
    _, token = account
    host, port = api.removeprefix("http://").split(":")
    slow = []
    # More slow senders than turns: each declares a body and sends half of it.
    for _ in range(LIMIT + 1):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            b"POST /webapi/monitors HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\nContent-Length: 40\r\n\r\n"
            b'{"url": "http://exa'
        )
        await writer.drain()
        slow.append((reader, writer))
    await asyncio.sleep(0.2)  # they are all in their handlers, waiting for the rest
    try:
        async with aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {token}"}
        ) as http, asyncio.timeout(3), http.get(f"{api}/webapi/monitors") as r:
            assert r.status == 200
        # And the slow ones are still served once their bodies arrive.
        for _, writer in slow:
            writer.write(b'mple.com/"}' + b" " * 10)
            await writer.drain()
        for reader, _ in slow:
            head = await asyncio.wait_for(reader.readline(), 5)
            assert head.startswith(b"HTTP/1.1 201"), head
    finally:
        for _, writer in slow:
            writer.close()
