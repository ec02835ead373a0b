"""Over TLS the uptime probe reads a response as it does over plain HTTP, however the TLS
records arrive: split across socket reads at any byte, several in one read, full handshake
or resumed, through either TLS layer. The pyOpenSSL layer hands OpenSSL the ciphertext where
the socket read put it, in the prober's shared buffer (``openssl_layer.receive``): OpenSSL
must have taken every byte before the buffer serves the next read. What a user sees: the
status, body assertions over the whole body (chunked, Content-Length or to the end), and at
most 1 MiB of body read."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from itertools import cycle
from typing import Any

import pytest
from OpenSSL import SSL

from engine import USER_AGENT
from engine.probes import openssl_layer
from engine.probes.http import TLS_LAYERS, HttpProber
from engine.probes.request import RequestSpec
from engine.probes.sessions import TlsSessions
from tests.support.targets import TlsCerts

KEYWORD = b"<<the end of the body>>"
MIB = 1 << 20

Server = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsCerts:
    return TlsCerts(tmp_path_factory.mktemp("certs"))


@pytest.fixture(params=TLS_LAYERS)
def layer(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def head(extra: str) -> bytes:
    return (f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n{extra}"
            "Connection: close\r\n\r\n").encode()


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """``/chunked``: a chunked body of 300 chunks with KEYWORD last; ``/eof``: 300 KB then
    KEYWORD, to the end of the connection; ``/big?at=N``: Content-Length 2 MiB with KEYWORD
    at N; anything else: 200 KB by Content-Length ending in KEYWORD."""
    try:
        request = await reader.readuntil(b"\r\n\r\n")
        target = request.split(b" ", 2)[1].decode()
        if target == "/chunked":
            writer.write(head("Transfer-Encoding: chunked\r\n"))
            for i in range(300):
                chunk = bytes([97 + i % 26]) * (1000 + i)
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(KEYWORD), KEYWORD))
        elif target == "/eof":
            writer.write(head("") + b"e" * 300_000 + KEYWORD)
        elif target.startswith("/big?at="):
            at = int(target.partition("=")[2])
            body = bytearray(b"b" * 2 * MIB)
            body[at : at + len(KEYWORD)] = KEYWORD
            writer.write(head(f"Content-Length: {len(body)}\r\n"))
            for i in range(0, len(body), 64 * 1024):
                writer.write(body[i : i + 64 * 1024])
                await writer.drain()
        else:
            writer.write(head("Content-Length: 200023\r\n") + b"c" * 200_000 + KEYWORD)
        await writer.drain()
    except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
        pass  # the probe stops reading once it has what it needs
    finally:
        writer.close()


async def relay(server_port: int, pieces: list[int]) -> tuple[asyncio.Server, int]:
    """A TCP relay to ``server_port`` that passes the server's bytes on in pieces of the
    sizes in ``pieces`` (cycled), yielding after each: TLS records reach the probe split at
    many points, and several pieces at once when it reads late."""

    async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                   sizes: list[int] | None) -> None:
        size = cycle(sizes or [65536])
        try:
            while data := await src.read(65536):
                i = 0
                while i < len(data):
                    n = next(size)
                    dst.write(data[i : i + n])
                    i += n
                    await dst.drain()
                    await asyncio.sleep(0)
        except ConnectionError:
            pass
        finally:
            dst.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", server_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pump(reader, up_writer, None),
                             pump(up_reader, writer, pieces))

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    return srv, int(srv.sockets[0].getsockname()[1])


@contextlib.asynccontextmanager
async def tls_site(certs: TlsCerts, version: str,
                   pieces: list[int] | None = None) -> AsyncIterator[int]:
    """The port of a TLS server of ``answer`` (TLS ``version`` only, tickets as default),
    behind a splitting relay when ``pieces`` are given."""
    ctx = certs.server_context()
    v = ssl.TLSVersion.TLSv1_2 if version == "1.2" else ssl.TLSVersion.TLSv1_3
    ctx.minimum_version = ctx.maximum_version = v
    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=ctx)
    port = int(server.sockets[0].getsockname()[1])
    front = None
    if pieces is not None:
        front, port = await relay(port, pieces)
    try:
        yield port
    finally:
        for s in (front, server):
            if s is not None:
                s.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(s.wait_closed(), 2.0)


def body_spec(limit: int = MIB) -> RequestSpec:
    assertion = {"source": "body", "property": None, "comparison": "contains",
                 "target": KEYWORD.decode()}
    return RequestSpec.from_config({"headers": []}, [assertion], limit)


def prober_for(layer: str) -> HttpProber:
    return HttpProber(timeout=5.0, user_agent=USER_AGENT, allow_private=True, tls_layer=layer)


@pytest.mark.parametrize("version", ["1.2", "1.3"])
@pytest.mark.parametrize("pieces", [[1, 4, 13, 100, 1500, 5, 16389, 7], [16384, 333, 40000]])
async def test_records_split_anywhere_are_read_whole(
    certs: TlsCerts, layer: str, version: str, pieces: list[int],
) -> None:
    prober = prober_for(layer)
    try:
        async with tls_site(certs, version, pieces) as port:
            for path in ("/chunked", "/eof", "/length", "/chunked"):
                url = f"https://localhost:{port}{path}"
                out = await prober.probe(url, body_spec())
                assert out.status_code == 200 and out.error is None, (path, out)
                assert out.assertion_error is None, (path, out)  # KEYWORD, at the very end
                # The phases are all there: connect, handshake, first byte, total.
                assert out.connect_ms is not None and out.tls_ms is not None, out
                assert out.ttfb_ms is not None and 0 < out.ttfb_ms <= out.total_ms, out
                plain = await prober.probe(url)  # no assertion: no body callback
                assert plain.status_code == 200 and plain.error is None, (path, plain)
            # Every probe after the first resumed (TLS 1.3 through the ssl module: none).
            resumes = layer == "pyopenssl" or version == "1.2"
            assert prober.tls_handshakes == 8
            assert prober.tls_resumed == (7 if resumes else 0)
    finally:
        await prober.aclose()


@pytest.mark.parametrize("version", ["1.2", "1.3"])
async def test_at_most_1_mib_of_a_body_is_read(
    certs: TlsCerts, layer: str, version: str,
) -> None:
    prober = prober_for(layer)
    try:
        async with tls_site(certs, version) as port:
            inside = await prober.probe(f"https://localhost:{port}/big?at={MIB - 100}",
                                        body_spec())
            assert inside.status_code == 200 and inside.assertion_error is None, inside
            beyond = await prober.probe(f"https://localhost:{port}/big?at={MIB + 100}",
                                        body_spec())
            assert beyond.status_code == 200, beyond
            assert beyond.assertion_error == (
                f'body contains "{KEYWORD.decode()}" failed: not in the first 1 MiB')
            # Without assertions the probe also stops at 1 MiB: the answer stands, the
            # connection is dropped with 1 MiB of 2 read, long before the deadline.
            plain = await prober.probe(f"https://localhost:{port}/big?at=0")
            assert plain.status_code == 200 and plain.error is None, plain
            assert plain.total_ms < 4000
    finally:
        await prober.aclose()


async def test_a_resumed_tls_1_2_session_is_kept_without_encoding_it_again(
    certs: TlsCerts,
) -> None:
    """A TLS 1.2 resumption without a new ticket keeps the session offered (its DER, the
    same object); TLS 1.3 issues new tickets, so a new DER is kept each time."""
    for version, same in (("1.2", True), ("1.3", False)):
        prober = prober_for("pyopenssl")
        try:
            async with tls_site(certs, version) as port:
                key = TlsSessions.key("127.0.0.1", port, "localhost")
                kept = []
                for _ in range(3):
                    out = await prober.probe(f"https://localhost:{port}/length")
                    assert out.status_code == 200, out
                    kept.append(prober._sessions.get(key))
                assert prober.tls_resumed == 2
                assert all(k is not None for k in kept)
                assert (kept[2] is kept[1]) is same, version
        finally:
            await prober.aclose()


def test_ciphertext_left_unread_is_copied_before_its_buffer_is_reused(
    certs: TlsCerts, tmp_path: Any,
) -> None:
    """``settle`` after ``receive``: bytes OpenSSL has not read yet (it never leaves any
    when driven until it wants more, but were it to) are copied into a BIO of the
    connection's own, so overwriting the shared buffer loses nothing."""
    leaf = certs.ca.issue_cert("localhost", key_type=certs.key_type)
    pem = tmp_path / "leaf.pem"
    leaf.private_key_and_cert_chain_pem.write_to_path(str(pem))
    sctx = SSL.Context(SSL.TLS_SERVER_METHOD)
    sctx.use_certificate_chain_file(str(pem))
    sctx.use_privatekey_file(str(pem))
    server = SSL.Connection(sctx, None)
    server.set_accept_state()
    client = openssl_layer.connection(openssl_layer.client_context(), "localhost", None)
    shared = bytearray(65536)
    view = memoryview(shared)
    ptr = openssl_layer.pointer(view)

    def deliver(data: bytes) -> None:
        shared[: len(data)] = data
        openssl_layer.receive(client, ptr, len(data))

    done = openssl_layer.handshake(client)  # the ClientHello
    for _ in range(10):  # the handshake, flight by flight
        out = openssl_layer.outgoing(client)
        if out:
            server.bio_write(out)
        with contextlib.suppress(SSL.WantReadError):
            server.do_handshake()
        with contextlib.suppress(SSL.WantReadError):
            back = server.bio_read(65536)
            deliver(back)
            done = openssl_layer.handshake(client)
            openssl_layer.settle(client)
        if done:
            break
    assert done and not client.copying  # driven until it wanted more: nothing left
    out = openssl_layer.outgoing(client)  # the client's Finished
    if out:
        server.bio_write(out)
    server.do_handshake()

    server.sendall(b"first " * 2000)  # a record or two, not read before settle
    deliver(server.bio_read(65536))
    openssl_layer.settle(client)
    assert client.copying
    shared[:] = b"\xee" * len(shared)  # the next socket read lands here
    server.sendall(b"second")
    deliver(server.bio_read(65536))  # copied too, behind the first
    plain = bytearray(65536)
    pview = memoryview(plain)
    pptr = openssl_layer.pointer(pview)
    got = b""
    while (n := openssl_layer.read_into(client, pptr, len(plain))) > 0:
        got += bytes(pview[:n])
    assert n == 0 and got == b"first " * 2000 + b"second"
