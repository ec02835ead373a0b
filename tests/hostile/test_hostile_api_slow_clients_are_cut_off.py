"""Slowloris against the API: a client that trickles its headers a byte at a time, or opens
a connection and says nothing, is disconnected after ``KEEPALIVE_TIMEOUT_S`` (shortened to
1 s here) while other clients are served throughout. Slow bodies are a 408 (see
test_hostile_api_hostile_bodies_write_nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from engine.db.store import Store
from engine.runtime.settings import Settings
from engine.web import app as web_app

TIMEOUT = 1.0


@pytest.fixture
async def short_api(
    store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[str, int]]:
    monkeypatch.setattr(web_app, "KEEPALIVE_TIMEOUT_S", TIMEOUT)
    runner = web.AppRunner(web_app.create_app(store, settings))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield "127.0.0.1", port
    finally:
        await runner.cleanup()


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """True once the server closes the connection (EOF) within ``seconds``."""
    try:
        return await asyncio.wait_for(reader.read(), seconds) == b""
    except TimeoutError:
        return False


async def test_a_client_trickling_its_headers_is_disconnected(
    short_api: tuple[str, int], account: tuple[Any, str]
) -> None:
    host, port = short_api
    _, token = account
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /webapi/monitors HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def trickle() -> None:
        while True:
            writer.write(b"a")
            await writer.drain()
            await asyncio.sleep(0.1)

    trickler = asyncio.create_task(trickle())
    try:
        # Others are served while the slow client hangs on.
        async with aiohttp.ClientSession(
            f"http://{host}:{port}", headers={"Authorization": f"Bearer {token}"}
        ) as other:
            async with other.get("/webapi/monitors") as r:
                assert r.status == 200
        assert await closed_within(reader, TIMEOUT + 3)
        assert loop.time() - started < TIMEOUT + 3
    finally:
        trickler.cancel()
        await asyncio.gather(trickler, return_exceptions=True)
        writer.close()


async def test_a_silent_connection_is_disconnected(short_api: tuple[str, int]) -> None:
    reader, writer = await asyncio.open_connection(*short_api)
    try:
        assert await closed_within(reader, TIMEOUT + 3)
    finally:
        writer.close()


async def test_an_idle_keep_alive_connection_is_disconnected_after_its_answer(
    short_api: tuple[str, int]
) -> None:
    reader, writer = await asyncio.open_connection(*short_api)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        await reader.readexactly(length)
        assert await closed_within(reader, TIMEOUT + 3)
    finally:
        writer.close()
