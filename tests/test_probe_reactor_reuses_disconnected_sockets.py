"""The reactor ends a connection by disconnecting its socket (connect(AF_UNSPEC): a reset,
as before) and gives the same socket, still registered in its epoll, to the next
connection: no socket, epoll_ctl, setsockopt or close per probe. What the endpoints and
the servers see stays the same."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
from collections.abc import AsyncIterator

import pytest

from engine.probes import reactor as reactor_mod
from engine.probes.reactor import Reactor, SocketTransport
from tests.targets import closed_port

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="epoll and tcp_disconnect")


class _Endpoint:
    def __init__(self, loop: asyncio.AbstractEventLoop, request: bytes = b"") -> None:
        self.request = request
        self.buf = memoryview(bytearray(4096))
        self.received = bytearray()
        self.transport: SocketTransport | None = None
        self.failed: OSError | None = None
        self.lost: list[Exception | None] = []
        self.done: asyncio.Future[str] = loop.create_future()

    def _end(self, how: str) -> None:
        if not self.done.done():
            self.done.set_result(how)

    def connection_made(self, transport: SocketTransport) -> None:
        self.transport = transport
        if self.request:
            transport.write(self.request)

    def connection_failed(self, exc: OSError) -> None:
        self.failed = exc
        self._end("failed")

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:
        self.received += self.buf[:nbytes]
        if self.received.endswith(b"\n") and self.transport is not None:
            self.transport.abort()  # as a probe does once it has the answer
            self._end("answered")

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)
        self._end("lost")


@pytest.fixture
async def server() -> AsyncIterator[tuple[int, list[str]]]:
    """Answers a line with its length and then waits: how each connection ended ("reset"
    or "eof") is recorded."""
    ends: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        writer.write(b"%d\n" % len(line))
        await writer.drain()
        try:
            ends.append("eof" if not await reader.read(1) else "data")
        except ConnectionResetError:
            ends.append("reset")
        writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with srv:
        yield srv.sockets[0].getsockname()[1], ends


async def _exchange(reactor: Reactor, port: int, text: bytes = b"hello\n") -> _Endpoint:
    ep = _Endpoint(asyncio.get_running_loop(), text)
    reactor.connect(ep, "127.0.0.1", port)
    async with asyncio.timeout(5):
        assert await ep.done == "answered"
    return ep


async def test_one_socket_serves_connection_after_connection(
    server: tuple[int, list[str]],
) -> None:
    port, ends = server
    reactor = Reactor(asyncio.get_running_loop())
    fds = set()
    for i in range(20):
        ep = await _exchange(reactor, port, b"x" * i + b"\n")
        assert bytes(ep.received) == b"%d\n" % (i + 1)
        assert ep.transport is not None
        fds.add(ep.transport._fd)
    assert len(fds) == 1  # the same socket each time
    async with asyncio.timeout(5):
        while len(ends) < 20:
            await asyncio.sleep(0.01)
    assert ends == ["reset"] * 20  # every connection ended with a reset, as before
    assert len(reactor) == 0
    reactor.close()


async def test_a_refused_connect_on_a_reused_socket_is_reported_as_refused(
    server: tuple[int, list[str]],
) -> None:
    """The reset of the previous connection leaves no error behind for the next one."""
    port, _ = server
    loop = asyncio.get_running_loop()
    reactor = Reactor(loop)
    first = await _exchange(reactor, port)
    ep = _Endpoint(loop)
    reactor.connect(ep, "127.0.0.1", closed_port())
    async with asyncio.timeout(5):
        assert await ep.done == "failed"
    assert isinstance(ep.failed, ConnectionRefusedError)
    assert first.transport is not None
    # And after the refusal (a socket never connected is closed, not kept) all goes on.
    again = await _exchange(reactor, port)
    assert bytes(again.received) == b"6\n"
    reactor.close()


async def test_a_socket_bound_to_a_source_address_is_not_kept(
    server: tuple[int, list[str]],
) -> None:
    port, _ = server
    loop = asyncio.get_running_loop()
    reactor = Reactor(loop)
    ep = _Endpoint(loop, b"hi\n")
    reactor.connect(ep, "127.0.0.1", port, ("127.0.0.1", 0))
    async with asyncio.timeout(5):
        assert await ep.done == "answered"
    assert _spare_fds(reactor) == set()  # closed, not kept for connections from anywhere
    await _exchange(reactor, port)
    assert len(_spare_fds(reactor)) == 1
    reactor.close()


def _spare_fds(reactor: Reactor) -> set[int]:
    return {s.fileno() for s in (*reactor._spare4, *reactor._spare6)}


async def test_closing_the_reactor_closes_its_kept_sockets(
    server: tuple[int, list[str]],
) -> None:
    port, _ = server
    reactor = Reactor(asyncio.get_running_loop())
    await _exchange(reactor, port)
    kept = [*reactor._spare4]
    assert len(kept) == 1
    reactor.close()
    assert kept[0].fileno() == -1


async def test_an_event_of_a_socket_reused_within_the_same_batch_is_not_misdelivered() -> None:
    """Two answers in one epoll batch; the first endpoint to be called aborts the other
    connection and opens a third (to a closed port), which takes the socket just
    disconnected. The batch still holds the aborted connection's event (readable and
    writable): passed to the third connection, it would pass for a completed connect, and
    the refusal would come as a lost connection after ``connection_made``."""
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    loop_held, both_answered = threading.Event(), threading.Event()
    accepted: list[socket.socket] = []

    def serve() -> None:
        # A thread, so that it can answer while the event loop is held.
        listener.settimeout(10)
        with contextlib.suppress(OSError):
            for _ in range(2):
                conn, _ = listener.accept()
                accepted.append(conn)
                conn.recv(100)
            loop_held.wait(10)
            for conn in accepted:
                conn.sendall(b"ok\n")
            both_answered.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    reactor = Reactor(loop)
    third = _Endpoint(loop, b"3\n")
    refusing = closed_port()

    class _First(_Endpoint):
        other: _Endpoint | None = None

        def connection_made(self, transport: SocketTransport) -> None:
            super().connection_made(transport)
            if self.other is not None and self.other.transport is not None:
                loop.call_soon(hold)  # both connected and their requests sent

        def buffer_updated(self, nbytes: int) -> None:
            other = self.other
            super().buffer_updated(nbytes)
            if other is not None and not other.done.done() and other.transport is not None:
                other.transport.abort()
                other._end("aborted")
                reactor.connect(third, "127.0.0.1", refusing)

    def hold() -> None:
        # Keep the loop from polling until both answers are written: over loopback a write
        # has reached the peer's socket when it returns, so one batch holds both.
        loop_held.set()
        both_answered.wait(10)

    a, b = _First(loop, b"a\n"), _First(loop, b"b\n")
    a.other, b.other = b, a
    reactor.connect(a, "127.0.0.1", port)
    reactor.connect(b, "127.0.0.1", port)
    try:
        async with asyncio.timeout(10):
            assert {await a.done, await b.done} == {"answered", "aborted"}
            assert await third.done == "failed"
        assert isinstance(third.failed, ConnectionRefusedError)
        assert third.transport is None and third.lost == []
    finally:
        reactor.close()
        listener.close()
        for conn in accepted:
            conn.close()
        thread.join(10)


def test_the_kept_sockets_are_bounded() -> None:
    assert 0 < reactor_mod.SPARE_SOCKETS <= 1024
