"""Requests that aiohttp's HTTP parser refuses, sent byte for byte to the API as the service
serves it (engine.daemon.WebServer): each gets a 4xx with the API's JSON error body that
neither quotes the request back nor names a package to install, and the log gets one
warning line for it, without a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from engine.daemon import WebServer
from engine.db.store import Store
from engine.runtime.settings import Settings
from engine.web.app import create_app

SECRET = "s3cr3t-header-value"


def _request(headers: str, body: bytes = b"", token: str = "") -> bytes:
    head = (f"POST /webapi/monitors HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n{headers}\r\n")
    return head.encode("latin-1") + body


BODY = b'{"url": "http://127.0.0.1:9/"}'
CASES: dict[str, tuple[str, bytes]] = {
    "brotli Content-Encoding": (f"Content-Encoding: br\r\nX-Secret: {SECRET}\r\n"
                                f"Content-Length: {len(BODY)}\r\n", BODY),
    "zstd Content-Encoding": (f"Content-Encoding: zstd\r\nContent-Length: {len(BODY)}\r\n",
                              BODY),
    "gzip Content-Encoding on a body that is not gzip": (
        f"Content-Encoding: gzip\r\nContent-Length: {len(SECRET)}\r\n", SECRET.encode()),
    "bad chunk size": ("Transfer-Encoding: chunked\r\n", f"zz{SECRET}\r\nabc\r\n0\r\n\r\n"
                       .encode()),
    "Content-Length with Transfer-Encoding": (
        f"Content-Length: {len(BODY)}\r\nTransfer-Encoding: chunked\r\n",
        f"{len(BODY):x}\r\n".encode() + BODY + b"\r\n0\r\n\r\n"),
    "malformed Content-Length": (f"Content-Length: 1{SECRET}\r\n", BODY),
    "negative Content-Length": ("Content-Length: -1\r\n", BODY),
    "two Content-Lengths": (f"Content-Length: {len(BODY)}, 5\r\n", BODY),
    "bad header name": (f"X {SECRET}: 1\r\nContent-Length: {len(BODY)}\r\n", BODY),
    "control character in a header name": (f"X-\x01{SECRET}: 1\r\n"
                                           f"Content-Length: {len(BODY)}\r\n", BODY),
}


@pytest.fixture
async def served(store: Store, settings: Settings) -> AsyncIterator[tuple[int, str]]:
    """The API on a free loopback port through the service's own WebServer; its port and an
    account's token (a valid token: the requests get past authentication if they can)."""
    _, token = await store.create_account("acme")
    web = WebServer(create_app(store, settings), settings)
    stop = asyncio.Event()
    task = asyncio.create_task(web.run(stop))
    await asyncio.wait_for(web.listening.wait(), 10)
    assert web.port is not None
    try:
        yield web.port, token
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def _exchange(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)  # the server closes after the error
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


@pytest.mark.parametrize("case", list(CASES))
async def test_an_unreadable_request_gets_a_json_4xx_and_one_log_line(
    served: tuple[int, str], case: str, caplog: Any
) -> None:
    port, token = served
    headers, body = CASES[case]
    caplog.set_level(logging.DEBUG)
    status, resp_headers, resp_body = await _exchange(port, _request(headers, body, token))
    assert 400 <= status < 500, (status, resp_body)
    assert resp_headers["content-type"].startswith("application/json")
    message = orjson.loads(resp_body)["message"]
    assert isinstance(message, str) and message.endswith(".")
    # Nothing of the request comes back, and nothing about the server's packages.
    for leak in (SECRET, "install", "Brotli", "zstandard", "backports", "b'", "^"):
        assert leak not in resp_body.decode(), (leak, resp_body)
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) == 1, [r.getMessage() for r in records]
    (record,) = records
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert record.exc_text is None and "Traceback" not in record.getMessage()
    assert SECRET not in record.getMessage() and "127.0.0.1" in record.getMessage()


async def test_a_readable_request_on_the_same_server_still_works(
    served: tuple[int, str],
) -> None:
    port, token = served
    status, _, body = await _exchange(
        port, _request(f"Content-Length: {len(BODY)}\r\nConnection: close\r\n", BODY, token))
    assert status == 201, body
