"""The probes' socket reactor against a real local server: writes that do not fit are
finished later, failures reach the endpoint, and one faulty endpoint stops nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import struct
import sys
import threading
from collections.abc import AsyncIterator

import pytest

from engine.probes.reactor import MAX_EVENTS, READS_PER_EVENT, Reactor, SocketTransport
from tests.support.targets import closed_port


class _Endpoint:
    """Records what the reactor calls; ``done`` resolves on the first terminal call."""

    def __init__(self, loop: asyncio.AbstractEventLoop, request: bytes = b"") -> None:
        self.request = request
        self.buf = memoryview(bytearray(4096))
        self.received = bytearray()
        self.transport: SocketTransport | None = None
        self.failed: OSError | None = None
        self.lost: list[Exception | None] = []
        self.eof = False
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

    def eof_received(self) -> bool | None:
        self.eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)
        self._end("lost")


class _Exploding(_Endpoint):
    def buffer_updated(self, nbytes: int) -> None:
        raise RuntimeError("a bug in an endpoint")


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    """A server that reads everything, then answers with its length and closes."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        size = int((await reader.readline()).decode())
        data = await reader.readexactly(size)
        writer.write(b"%d\n" % len(data))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def test_an_exchange_arrives_whole_and_ends_with_eof(echo: int) -> None:
    loop = asyncio.get_running_loop()
    reactor = Reactor(loop)
    ep = _Endpoint(loop, b"5\nhello")
    reactor.connect(ep, "127.0.0.1", echo)
    async with asyncio.timeout(5):
        assert await ep.done == "lost"
    assert bytes(ep.received) == b"5\n"
    assert ep.eof and ep.lost == [None]
    assert len(reactor) == 0  # the closed connection is gone from the reactor
    reactor.close()


async def test_a_write_larger_than_the_socket_buffer_is_finished_when_writable(
    echo: int,
) -> None:
    """8 MiB cannot go in one send(): the rest waits for EPOLLOUT, in order."""
    loop = asyncio.get_running_loop()
    reactor = Reactor(loop)
    body = bytes(range(256)) * (8 * 4096)
    ep = _Endpoint(loop, b"%d\n" % len(body) + body)
    reactor.connect(ep, "127.0.0.1", echo)
    async with asyncio.timeout(10):
        assert await ep.done == "lost"
    assert bytes(ep.received) == b"%d\n" % len(body)
    reactor.close()


class _Counting(_Endpoint):
    """Ends once ``expect`` bytes are in, without waiting for the server to close."""

    def __init__(self, loop: asyncio.AbstractEventLoop, expect: int) -> None:
        super().__init__(loop)
        self.expect = expect

    def buffer_updated(self, nbytes: int) -> None:
        super().buffer_updated(nbytes)
        if len(self.received) >= self.expect:
            self._end("all")


async def test_a_burst_larger_than_the_read_buffer_is_read_whole_while_the_peer_waits() -> None:
    """Edge-triggered epoll announces arriving data once: the reactor must drain the socket
    (reads into a 4 KiB buffer until one comes back short), or the rest of a 1 MiB burst
    would wait for an edge that never comes while the server keeps the connection open."""
    loop = asyncio.get_running_loop()
    burst = bytes(range(256)) * 4096
    release = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(burst)
        await writer.drain()
        await release.wait()  # the connection stays open: no EOF to wake the client
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    reactor = Reactor(loop)
    try:
        async with server:
            ep = _Counting(loop, len(burst))
            reactor.connect(ep, "127.0.0.1", server.sockets[0].getsockname()[1])
            async with asyncio.timeout(10):
                assert await ep.done == "all"
            assert bytes(ep.received) == burst
            assert ep.lost == []
            release.set()
    finally:
        reactor.close()


async def test_more_answers_ready_at_once_than_one_wake_up_takes_all_arrive() -> None:
    """A wake-up takes at most MAX_EVENTS ready sockets from the epoll; the others stay
    ready and are taken on the loop's next turn. Three times as many connections get their
    answers at the same moment (a server that holds every answer until all have
    connected): each endpoint must get its own bytes and its end."""
    loop = asyncio.get_running_loop()
    count = 3 * MAX_EVENTS
    writers: list[asyncio.StreamWriter] = []
    everyone = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        if len(writers) == count:
            everyone.set()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=count)
    port = server.sockets[0].getsockname()[1]
    reactor = Reactor(loop)
    try:
        async with server:
            eps = [_Endpoint(loop) for _ in range(count)]
            for ep in eps:
                reactor.connect(ep, "127.0.0.1", port)
            async with asyncio.timeout(10):
                await everyone.wait()
                # Every answer written and every connection closed in one callback: the
                # client's sockets all turn readable before its reactor runs again.
                for i, writer in enumerate(writers):
                    writer.write(b"%d\n" % i)
                    writer.close()
                assert await asyncio.gather(*(ep.done for ep in eps)) == ["lost"] * count
            answers = sorted(int(bytes(ep.received)) for ep in eps)
            assert answers == list(range(count))
            assert all(ep.eof and ep.lost == [None] for ep in eps)
            assert len(reactor) == 0
    finally:
        reactor.close()


class _Connected(_Endpoint):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.made: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: SocketTransport) -> None:
        super().connection_made(transport)
        self.made.set_result(None)


@pytest.mark.parametrize("end", ["reset", "fin"])
async def test_data_and_the_end_that_arrive_together_are_both_delivered(end: str) -> None:
    """Half a response and then a reset (or the peer's FIN), both in before the reactor
    looks: one edge reports them, and the read after the data must still find the end (no
    later edge would announce it)."""
    loop = asyncio.get_running_loop()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/pl"
    server = socket.create_server(("127.0.0.1", 0))
    go, sent = threading.Event(), threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            if go.wait(5):
                conn.sendall(head)
                if end == "reset":
                    linger = struct.pack("ii", 1, 0)
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        sent.set()  # closed: on loopback the data and the end are in the client's socket

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    reactor = Reactor(loop)
    try:
        ep = _Connected(loop)
        reactor.connect(ep, "127.0.0.1", server.getsockname()[1])
        async with asyncio.timeout(5):
            await ep.made
        go.set()
        assert sent.wait(5)  # blocks the loop on purpose: the reactor must not look before
        async with asyncio.timeout(5):
            assert await ep.done == "lost"
        assert bytes(ep.received) == head
        if end == "reset":
            assert len(ep.lost) == 1 and isinstance(ep.lost[0], ConnectionResetError)
        else:
            assert ep.eof and ep.lost == [None]
    finally:
        reactor.close()
        server.close()
        thread.join(5)


_FIREHOSE = """
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
chunk = b"x" * 262144
try:
    while True:
        conn.sendall(chunk)
except OSError:
    pass
"""


class _Endless(_Endpoint):
    """Reads forever (an endpoint without a limit), with some work per read so that the
    peer keeps the socket full. ``turns`` is bumped by a callback that reschedules itself
    each time the loop gets a turn; the endpoint records the most reads it saw between two
    turns, and aborts once ``budget`` bytes are in."""

    def __init__(self, loop: asyncio.AbstractEventLoop, budget: int) -> None:
        super().__init__(loop)
        # Small reads: the socket's window (~128 KiB) is then hundreds of reads deep.
        self.buf = memoryview(bytearray(256))
        self.budget = budget
        self.count = 0
        self.turns = 0
        self._seen_turns = 0
        self._run = 0
        self.longest_run = 0

    def buffer_updated(self, nbytes: int) -> None:
        self.count += nbytes
        sum(range(2000))  # ~30 us: slower than the peer sends
        if self.turns != self._seen_turns:
            self._seen_turns, self._run = self.turns, 0
        self._run += 1
        self.longest_run = max(self.longest_run, self._run)
        if self.count > self.budget:
            assert self.transport is not None
            self.transport.abort()
            self._end("read")


async def test_a_peer_sending_faster_than_we_read_does_not_hold_the_event_loop() -> None:
    """Edge triggering reads until the socket is drained; a peer in another process that
    keeps it full must still let the loop's other callbacks run: the reactor reads at most
    READS_PER_EVENT times per event and goes on after the loop's other callbacks."""
    loop = asyncio.get_running_loop()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _FIREHOSE, stdout=asyncio.subprocess.PIPE
    )
    reactor = Reactor(loop)
    ep = _Endless(loop, budget=4 * 1024 * 1024)

    def tick() -> None:
        ep.turns += 1
        if not ep.done.done():
            loop.call_soon(tick)

    try:
        assert proc.stdout is not None
        async with asyncio.timeout(10):
            port = int(await proc.stdout.readline())
        reactor.connect(ep, "127.0.0.1", port)
        tick()
        async with asyncio.timeout(30):
            assert await ep.done == "read"
        # At most one batch from the epoll's event and one from the continuation per turn.
        assert ep.longest_run <= 2 * READS_PER_EVENT, ep.longest_run
    finally:
        reactor.close()
        # The firehose may already have ended: its peer's reset (reactor.close) breaks its
        # pipe, and on a busy machine it exits before kill() runs.
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def test_a_refused_connect_reaches_the_endpoint_as_connection_failed() -> None:
    loop = asyncio.get_running_loop()
    reactor = Reactor(loop)
    ep = _Endpoint(loop)
    reactor.connect(ep, "127.0.0.1", closed_port())
    async with asyncio.timeout(5):
        assert await ep.done == "failed"
    assert isinstance(ep.failed, ConnectionRefusedError)
    assert ep.transport is None and ep.lost == []
    reactor.close()


async def test_a_source_address_that_is_not_ours_fails_at_once(echo: int) -> None:
    reactor = Reactor(asyncio.get_running_loop())
    with pytest.raises(OSError) as info:
        # TEST-NET-1: never an address of this machine.
        reactor.connect(_Endpoint(asyncio.get_running_loop()), "127.0.0.1", echo,
                        ("192.0.2.1", 0))
    assert info.value.errno == errno.EADDRNOTAVAIL
    assert len(reactor) == 0
    reactor.close()


async def test_closing_the_reactor_tells_every_open_connection() -> None:
    loop = asyncio.get_running_loop()
    accepted: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # never answers

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reactor = Reactor(loop)
    eps = [_Endpoint(loop, b"x") for _ in range(3)]
    for ep in eps:
        reactor.connect(ep, "127.0.0.1", port)
    async with asyncio.timeout(5):
        while any(ep.transport is None for ep in eps):
            await asyncio.sleep(0.01)
    reactor.close()
    assert [type(ep.lost[0]) for ep in eps] == [ConnectionAbortedError] * 3
    assert all(ep.transport is not None and ep.transport.is_closing() for ep in eps)
    for w in accepted:
        w.close()
    server.close()
    await server.wait_closed()


async def test_a_faulty_endpoint_is_cut_off_and_the_others_go_on(
    echo: int, caplog: pytest.LogCaptureFixture
) -> None:
    loop = asyncio.get_running_loop()
    reactor = Reactor(loop)
    bad = _Exploding(loop, b"3\nabc")
    good = [_Endpoint(loop, b"3\nabc") for _ in range(5)]
    for ep in (bad, *good):
        reactor.connect(ep, "127.0.0.1", echo)
    async with asyncio.timeout(5):
        await asyncio.gather(bad.done, *(ep.done for ep in good))
    assert isinstance(bad.lost[0], RuntimeError)
    assert [bytes(ep.received) for ep in good] == [b"3\n"] * 5
    assert "probe connection callback failed" in caplog.text
    reactor.close()


async def test_a_probe_resets_its_connection_once_it_has_the_answer() -> None:
    """Closed with SO_LINGER 0: the server sees a reset, not an orderly FIN, and neither
    side keeps the connection in TIME_WAIT."""
    from engine import USER_AGENT
    from engine.probes.http import HttpProber

    seen: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        try:
            data = await reader.read(1)  # the server keeps its side open and waits
            seen.set_result("eof" if not data else "data")
        except ConnectionResetError:
            seen.set_result("reset")
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        prober = HttpProber(timeout=2.0, user_agent=USER_AGENT, allow_private=True)
        outcome = await prober.probe(f"http://127.0.0.1:{port}/")
        assert outcome.status_code == 200
        async with asyncio.timeout(5):
            assert await seen == "reset"
