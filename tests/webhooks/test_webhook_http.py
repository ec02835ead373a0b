"""The deliverer's HTTP client (engine.delivery.webhooks.http) against raw loopback servers that
answer byte for byte what each test needs: the request is exactly what was asked for, the
answer is its first final status, at most 64 KiB of a body is read, and every failure is
one of the client's errors. Every wait is bounded."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from engine.delivery.webhooks.http import (
    MAX_RESPONSE_BODY,
    BadUrl,
    BlockedTarget,
    ConnectError,
    NoAnswer,
    ResolveError,
    WebhookClient,
    parse_url,
)

# A handler gets the whole request (head and body) and the writer to answer on.
Handler = Callable[[bytes, asyncio.StreamWriter], Awaitable[None]]


class Server:
    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.handler: Handler = answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            request = head + await reader.readexactly(length)
            self.requests.append(request)
            await self.handler(request, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def answer(*chunks: bytes, hang: bool = False) -> Handler:
    async def handle(_: bytes, writer: asyncio.StreamWriter) -> None:
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
        if hang:
            await asyncio.sleep(30)
    return handle


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server()
    s = await asyncio.start_server(srv.serve, "127.0.0.1", 0)
    srv.port = s.sockets[0].getsockname()[1]
    try:
        yield srv
    finally:
        s.close()


HEADERS = b"X-Service-Webhook: 7\r\n"


async def post(server: Server, path: str = "/hook", *, body: bytes = b'{"a":1}',
               client: WebhookClient | None = None) -> object:
    client = client or WebhookClient(allow_private=True)
    async with asyncio.timeout(5):
        return await client.post(parse_url(f"http://127.0.0.1:{server.port}{path}"), HEADERS,
                                 body, timeout=5, connect_timeout=2)


async def test_the_request_is_the_exact_body_with_its_length_and_connection_close(
    server: Server,
) -> None:
    body = '{"name":"é \\" x"}'.encode()
    result = await post(server, "/hook?a=1&b=%20x", body=body)
    assert getattr(result, "status", None) == 200
    (request,) = server.requests
    head, sent = request.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /hook?a=1&b=%20x HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}".encode() in lines
    assert b"X-Service-Webhook: 7" in lines
    assert b"Content-Length: %d" % len(body) in lines
    assert b"Connection: close" in lines
    assert not any(line.lower().startswith(b"cookie") for line in lines)
    assert sent == body


async def test_interim_answers_are_skipped_and_the_final_status_counts(server: Server) -> None:
    server.handler = answer(b"HTTP/1.1 100 Continue\r\n\r\n",
                            b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n",
                            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", hang=True)
    result = await post(server)  # a 200 ends the exchange even while the server lingers
    assert getattr(result, "status", None) == 200


async def test_an_error_body_is_read_to_64_kib_at_most_and_quoted(server: Server) -> None:
    first = b"not today " * 30
    big = first + b"x" * (4 * MAX_RESPONSE_BODY)
    # Chunked, and the server then hangs: the client must stop at the cap by itself.
    chunk = b"%x\r\n%s\r\n" % (len(big), big)
    server.handler = answer(
        b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\nLocation: /x\r\n\r\n", chunk,
        hang=True)
    result = await post(server)
    assert getattr(result, "status", None) == 500
    assert getattr(result, "snippet", b"") == first[:200]


async def test_a_redirect_reports_its_location(server: Server) -> None:
    server.handler = answer(b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\n"
                            b"Content-Length: 0\r\n\r\n")
    result = await post(server)
    assert (getattr(result, "status", None), getattr(result, "location", None)) == (
        302, "/elsewhere")


@pytest.mark.parametrize("reply", [b"", b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nX: " + b"y" * (
    70 * 1024)])
async def test_no_answer_or_a_malformed_one_is_no_answer(server: Server, reply: bytes) -> None:
    server.handler = answer(reply)
    with pytest.raises(NoAnswer):
        await post(server)


async def test_a_refused_connection_is_a_connect_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError):
        await WebhookClient(allow_private=True).post(
            parse_url(f"http://127.0.0.1:{port}/"), HEADERS, b"{}", timeout=5, connect_timeout=2)


async def test_private_addresses_are_refused_before_connecting(server: Server) -> None:
    calls: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["93.184.216.34", "127.0.0.1"]

    strict = WebhookClient(allow_private=False, resolver=rebinding)
    with pytest.raises(BlockedTarget, match=r"resolves to a non-public address \(127.0.0.1\)"):
        await strict.post(parse_url(f"http://hooks.example:{server.port}/"), HEADERS, b"{}",
                          timeout=5, connect_timeout=2)
    with pytest.raises(BlockedTarget, match="is a non-public address"):
        await strict.post(parse_url(f"http://127.0.0.1:{server.port}/"), HEADERS, b"{}",
                          timeout=5, connect_timeout=2)
    assert calls == ["hooks.example"] and server.requests == []

    async def nothing(host: str, port: int) -> list[str]:
        raise OSError("no such host")

    with pytest.raises(ResolveError):
        await WebhookClient(allow_private=True, resolver=nothing).post(
            parse_url("http://hooks.example/"), HEADERS, b"{}", timeout=5, connect_timeout=2)


def test_urls_are_split_into_host_port_and_request_head() -> None:
    t = parse_url("https://user:p%40ss@Hooks.Example.com/a b?q=é#frag")
    assert (t.scheme, t.host, t.port, t.literal) == ("https", "hooks.example.com", 443, None)
    auth = base64.b64encode(b"user:p@ss").decode()
    assert t.head == (f"POST /a%20b?q=%C3%A9 HTTP/1.1\r\nHost: hooks.example.com\r\n"
                      f"Authorization: Basic {auth}\r\n").encode()
    v6 = parse_url("http://[::1]:8080")
    assert (v6.host, v6.port, v6.literal) == ("::1", 8080, "::1")
    assert v6.head == b"POST / HTTP/1.1\r\nHost: [::1]:8080\r\n"
    for bad in ("ftp://x/", "/relative", "http://", "http://bad host/", "http://x:99999/"):
        with pytest.raises(BadUrl):
            parse_url(bad)


async def test_a_receiver_that_never_answers_times_out_on_the_total_deadline(
    server: Server,
) -> None:
    server.handler = answer(b"HTTP/1.1 ", hang=True)  # half a status line, then nothing
    client = WebhookClient(allow_private=True)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError):
        await client.post(parse_url(f"http://127.0.0.1:{server.port}/"), HEADERS, b"{}",
                          timeout=0.5, connect_timeout=0.2)
    # Connected within the connect deadline, so the total one applies.
    assert 0.45 < loop.time() - started < 2.0
