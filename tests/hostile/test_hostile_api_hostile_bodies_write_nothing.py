"""Hostile request bodies on every endpoint that reads one: oversize (413), deeply nested or
not an object (422 under ``errors.body``), slow (408). Each is refused with the documented
body, the server stays up, and nothing at all is written."""

from __future__ import annotations

import asyncio
import zlib
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest

from engine.db.store import Store
from engine.web import jsonio

TABLES = ("accounts", "monitors", "checks", "check_periods", "webhook_events")
TOO_LARGE = {"message": "The request body is too large (at most 64 KiB)."}


async def snapshot(pool: asyncpg.Pool) -> dict[str, list[asyncpg.Record]]:
    return {t: await pool.fetch(f"SELECT * FROM {t} ORDER BY 1") for t in TABLES}


@pytest.fixture
async def writes(client: aiohttp.ClientSession) -> list[tuple[str, str]]:
    """Every endpoint that reads a body, pointed at rows that exist."""
    async with client.post("/webapi/monitors", json={"url": "https://a.example/"}) as r:
        monitor = await r.json()
    return [
        ("POST", "/webapi/monitors"),
        ("PUT", f"/webapi/monitors/{monitor['id']}"),
        ("PUT", f"/webapi/checks/{monitor['checks']['uptime']['id']}"),
        ("PUT", f"/webapi/checks/{monitor['checks']['certificate_health']['id']}"),
        ("PUT", "/webapi/account"),
    ]


def nested(depth: int, leaf: str = '"https://x.example/"') -> bytes:
    return ('{"url":' * depth + leaf + "}" * depth).encode()


BAD_JSON = {
    "arrays 30k deep": b"[" * 30_000 + b"]" * 30_000,
    "objects 2k deep": nested(2000),
    "objects 1100 deep": nested(1100),
    "unclosed 60k": b"[" * 60_000,
    "a top-level array": b'[{"url": "https://x.example/"}]',
    "an array of strings": b'["url", "https://x.example/"]',
    "a string": b'"{\\"url\\": \\"https://x.example/\\"}"',
    "a number": b"1e999",
    "null": b"null",
    "true": b"true",
    "NaN": b'{"url": NaN}',
    "trailing garbage": b'{"url": "https://x.example/"} {}',
    "duplicate body": b'{"url": "https://x.example/"}{"url": "https://y.example/"}',
    "invalid utf-8": b'{"url": "https://x.example/\xff"}',
    "a lone surrogate": b'{"alias": "\\ud800", "url": "https://x.example/"}',
    "a BOM": b'\xef\xbb\xbf{"url": "https://x.example/"}',
    "form encoded": b"url=https%3A%2F%2Fx.example%2F",
}


async def test_bodies_that_are_not_a_json_object_are_422_under_body(
    client: aiohttp.ClientSession, store: Store, writes: list[tuple[str, str]]
) -> None:
    before = await snapshot(store.pool)
    for name, raw in BAD_JSON.items():
        for method, path in writes:
            async with client.request(method, path, data=raw,
                                      headers={"Content-Type": "application/json"}) as r:
                assert r.status == 422, (name, method, path, r.status)
                body = await r.json()
                assert set(body) == {"message", "errors"}
                assert list(body["errors"]) == ["body"], (name, body)
    assert await snapshot(store.pool) == before


async def test_deep_nesting_inside_a_valid_object_is_a_field_error(
    client: aiohttp.ClientSession, store: Store
) -> None:
    before = await snapshot(store.pool)
    deep = b'{"alias": ' + b'{"a":' * 500 + b"1" + b"}" * 500 + b', "url": "https://x.example/"}'
    async with client.post("/webapi/monitors", data=deep) as r:
        assert r.status == 422
        assert list((await r.json())["errors"]) == ["alias"]
    # Deep nesting in a field nobody reads is ignored like any unknown field.
    ignored = b'{"x": ' + b"[" * 900 + b"]" * 900 + b', "url": "https://x.example/"}'
    async with client.post("/webapi/monitors", data=ignored) as r:
        assert r.status == 201
    after = await snapshot(store.pool)
    assert len(after["monitors"]) == len(before["monitors"]) + 1


@pytest.mark.parametrize("size", [64 * 1024 + 1, 1024 * 1024, 8 * 1024 * 1024])
async def test_oversize_bodies_are_413_declared_or_chunked(
    client: aiohttp.ClientSession, store: Store, writes: list[tuple[str, str]], size: int
) -> None:
    before = await snapshot(store.pool)
    # Valid JSON of exactly ``size`` bytes that would create something if it were read.
    overhead = len(orjson.dumps({"url": "https://big.example/", "pad": ""}))
    payload = orjson.dumps({"url": "https://big.example/", "pad": "a" * (size - overhead)})
    assert len(payload) == size

    async def chunks() -> Any:
        for i in range(0, len(payload), 16 * 1024):
            yield payload[i:i + 16 * 1024]

    for method, path in writes:
        async with client.request(method, path, data=payload) as r:
            assert r.status == 413, (method, path)
            assert await r.json() == TOO_LARGE
        async with client.request(method, path, data=chunks()) as r:  # no Content-Length
            assert r.status == 413, (method, path)
            assert await r.json() == TOO_LARGE
    assert await snapshot(store.pool) == before
    async with client.get("/webapi/monitors") as r:  # the server carries on
        assert r.status == 200


async def test_a_compressed_bomb_is_413_without_inflating_it(
    client: aiohttp.ClientSession, store: Store
) -> None:
    # 64 MiB of JSON in under 64 KiB of gzip: the limit applies to the inflated body, which
    # is refused as soon as it passes 64 KiB.
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = packer.compress(b'{"url": "https://bomb.example/", "pad": "')
    chunk = b"a" * (1024 * 1024)
    for _ in range(64):
        bomb += packer.compress(chunk)
    bomb += packer.compress(b'"}') + packer.flush()
    assert len(bomb) < 64 * 1024
    before = await snapshot(store.pool)
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with client.post("/webapi/monitors", data=bomb,
                           headers={"Content-Encoding": "gzip"}) as r:
        assert r.status == 413
        assert await r.json() == TOO_LARGE
    assert loop.time() - started < 5
    assert await snapshot(store.pool) == before


async def test_a_lying_content_length_is_no_5xx(api: str, account: tuple[Any, str],
                                                 store: Store) -> None:
    _, token = account
    before = await snapshot(store.pool)
    host, port = api.removeprefix("http://").split(":")
    for declared, sent in (("10", b'{"url": "https://x.example/"}'), ("-1", b"{}"),
                           ("abc", b"{}"), ("99999999999999999999", b"{}")):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            f"POST /webapi/monitors HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {declared}\r\n"
            "Connection: close\r\n\r\n".encode() + sent)
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        status = int(response.split(b" ", 2)[1])
        assert 400 <= status < 500, (declared, response[:200])
    assert await snapshot(store.pool) == before


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One response's head and body (by Content-Length), without waiting for EOF."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    return head, await reader.readexactly(length)


async def test_a_body_that_trickles_in_is_408_while_others_are_served(
    api: str, account: tuple[Any, str], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonio, "BODY_READ_TIMEOUT_S", 0.5)
    _, token = account
    before = await snapshot(store.pool)
    host, port = api.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    body = b'{"url": "https://slow.example/"}'
    writer.write(
        f"POST /webapi/monitors HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body[:5])
    await writer.drain()
    started = asyncio.get_running_loop().time()
    async with aiohttp.ClientSession(
        base_url=api, headers={"Authorization": f"Bearer {token}"}
    ) as other:
        async with other.get("/webapi/monitors") as r:
            assert r.status == 200
    try:
        head, payload = await asyncio.wait_for(read_response(reader), 10)
    finally:
        writer.close()
    elapsed = asyncio.get_running_loop().time() - started
    assert head.startswith(b"HTTP/1.1 408"), head
    assert b"connection: close" in head.lower()
    assert orjson.loads(payload) == {"message": "The request body did not arrive in time."}
    assert elapsed < 5
    assert await snapshot(store.pool) == before
