"""The uptime probe reads Location only where it matters: after a redirect status, in any
letter case, and never from an interim (1xx) response."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from engine import USER_AGENT
from engine.probes.http import HttpProber

# path -> raw response
ANSWERS = {
    b"/early": (b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\nLocation: /elsewhere\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"),
    b"/lower": b"HTTP/1.1 302 Found\r\nlocation: /ok\r\nContent-Length: 0\r\n\r\n",
    b"/many": (b"HTTP/1.1 301 Moved\r\n"
               + b"".join(b"X-H%d: %d\r\n" % (i, i) for i in range(40))
               + b"LOCATION: /ok\r\nContent-Length: 0\r\n\r\n"),
    b"/ok-with-location": b"HTTP/1.1 200 OK\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n",
    b"/ok": b"HTTP/1.1 204 No Content\r\n\r\n",
}
# path -> a response written in pieces, each its own read at the probe
PIECES = {
    # Location split across reads, after an interim response with its own Location.
    b"/pieces": [b"HTTP/1.1 103 Early Hints\r\nLocation: /elsewhere\r\n\r\nHTTP/1.1 30",
                 b"2 Found\r\nX-A: 1\r\nLoca", b"tion: /o", b"k\r\nContent-Length: 0\r\n",
                 b"\r\n"],
    # Only the interim head has a Location: the 302 is the answer.
    b"/pieces-no-location": [b"HTTP/1.1 103 Early Hints\r\nLocation: /elsewhere\r\n\r\n",
                             b"HTTP/1.1 302 Found\r\n", b"Content-Length: 0\r\n\r\n"],
}


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[bytes]]]:
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split(b" ", 2)[1]
        seen.append(path)
        for piece in PIECES.get(path, [ANSWERS.get(path, b"HTTP/1.1 404 Not Found\r\n\r\n")]):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.02)
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        srv.close()
        await srv.wait_closed()


@pytest.fixture
def prober() -> HttpProber:
    return HttpProber(timeout=2.0, user_agent=USER_AGENT, allow_private=True)


async def test_interim_location_is_ignored(server: tuple[str, list[bytes]],
                                           prober: HttpProber) -> None:
    base, seen = server
    o = await prober.probe(base + "/early")
    assert (o.status_code, o.error, o.redirects) == (200, None, 0)
    assert seen == [b"/early"]


@pytest.mark.parametrize("path", ["/lower", "/many"])
async def test_location_in_any_case_is_followed(server: tuple[str, list[bytes]],
                                                prober: HttpProber, path: str) -> None:
    base, seen = server
    o = await prober.probe(base + path)
    assert (o.status_code, o.error, o.redirects) == (204, None, 1)
    assert seen == [path.encode(), b"/ok"]


async def test_location_without_redirect_status_is_not_followed(
        server: tuple[str, list[bytes]], prober: HttpProber) -> None:
    base, seen = server
    o = await prober.probe(base + "/ok-with-location")
    assert (o.status_code, o.redirects) == (200, 0)
    assert seen == [b"/ok-with-location"]


async def test_location_of_a_head_that_spans_reads(server: tuple[str, list[bytes]],
                                                    prober: HttpProber) -> None:
    base, seen = server
    o = await prober.probe(base + "/pieces")
    assert (o.status_code, o.error, o.redirects) == (204, None, 1)
    assert seen == [b"/pieces", b"/ok"]
    o = await prober.probe(base + "/pieces-no-location")
    assert (o.status_code, o.error, o.redirects) == (302, None, 0)
