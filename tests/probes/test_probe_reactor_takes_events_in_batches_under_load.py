"""The probes' reactor under load: once ready sockets wake the loop more often than once
per batch interval it polls on a timer instead, loses no byte and no end while it does,
and goes back to waking for each event when the load is gone (engine/probes/reactor.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from engine import USER_AGENT
from engine.probes.http import HttpProber
from engine.probes.reactor import SWITCH_WINDOW, Reactor, SocketTransport
from engine.runtime.settings import Settings
from tests.support.targets import HttpTarget

BATCH = 0.01  # s
TICKS = SWITCH_WINDOW / BATCH  # more wake-ups than this in a window start polling


class _Endpoint:
    """Collects what arrives; ``done`` resolves at the connection's end."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.buf = memoryview(bytearray(4096))
        self.received = bytearray()
        self.transport: SocketTransport | None = None
        self.arrivals: list[float] = []  # the moment of each read
        self.sizes: list[int] = []  # and its size
        self.done: asyncio.Future[list[Exception | None]] = loop.create_future()
        self.lost: list[Exception | None] = []

    def connection_made(self, transport: SocketTransport) -> None:
        self.transport = transport
        transport.write(b"go\n")

    def connection_failed(self, exc: OSError) -> None:
        self.done.set_exception(exc)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:
        self.arrivals.append(time.monotonic())
        self.sizes.append(nbytes)
        self.received += self.buf[:nbytes]

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)
        if not self.done.done():
            self.done.set_result(self.lost)


async def _until(condition: object, seconds: float) -> None:
    async with asyncio.timeout(seconds):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.005)


class Chatty:
    """A server that, once asked, writes a line every ``period`` seconds (its number and the
    moment it was written) until ``stop`` is set, then ``end`` and closes."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()
        self.period = 0.001
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        i = 0
        while not self.stop.is_set() and i < 5000:
            writer.write(b"%d %.6f\n" % (i, time.monotonic()))
            i += 1
            await asyncio.sleep(self.period)
        writer.write(b"end\n")
        await writer.drain()
        writer.close()


@pytest.fixture
async def chatty() -> AsyncIterator[Chatty]:
    c = Chatty()
    server = await asyncio.start_server(c.serve, "127.0.0.1", 0)
    c.port = server.sockets[0].getsockname()[1]
    async with server:
        yield c
        c.stop.set()


def _open(reactor: Reactor, port: int, n: int) -> list[_Endpoint]:
    """``n`` connections to the chatty server on ``port``, through ``reactor``."""
    eps = [_Endpoint(reactor.loop) for _ in range(n)]
    for ep in eps:
        reactor.connect(ep, "127.0.0.1", port)
    return eps


def _lines(ep: _Endpoint) -> list[bytes]:
    return bytes(ep.received).split(b"\n")[:-1]


def _delays(ep: _Endpoint, since: float) -> list[float]:
    """How long each line written after ``since`` took to reach the endpoint: the moment
    of the read that completed it minus the moment the server wrote it."""
    out = []
    data = bytes(ep.received)
    pos = 0
    pending = b""
    for size, at in zip(ep.sizes, ep.arrivals, strict=True):
        *lines, pending = (pending + data[pos : pos + size]).split(b"\n")
        pos += size
        for line in lines:
            parts = line.split()
            if len(parts) == 2 and float(parts[1]) >= since:
                out.append(at - float(parts[1]))
    return out


async def test_a_busy_reactor_polls_and_delivers_every_line_and_every_end(
    chatty: Chatty,
) -> None:
    reactor = Reactor(asyncio.get_running_loop(), BATCH)
    try:
        eps = _open(reactor, chatty.port, 20)
        await _until(lambda: reactor.polling, 5.0)
        # While polling, a line waits for the next tick: up to BATCH, half of it on average.
        since = time.monotonic()
        await asyncio.sleep(0.3)
        assert reactor.polling
        delays = [d for ep in eps for d in _delays(ep, since)]
        assert len(delays) > 100
        assert sum(delays) / len(delays) >= BATCH * 0.25
        chatty.stop.set()
        async with asyncio.timeout(5):
            ends = await asyncio.gather(*(ep.done for ep in eps))
        assert ends == [[None]] * len(eps)
        for ep in eps:
            lines = _lines(ep)
            assert lines[-1] == b"end"
            assert [line.split()[0] for line in lines[:-1]] == [
                b"%d" % i for i in range(len(lines) - 1)]  # none lost, none reordered
        assert len(reactor) == 0
        # The load is gone: back to waking for each event, and a line is taken at once.
        await _until(lambda: not reactor.polling, 5.0)
        chatty.stop.clear()
        chatty.period = 2 * SWITCH_WINDOW / TICKS  # TICKS / 2 wake-ups a window
        since = time.monotonic()
        [ep] = _open(reactor, chatty.port, 1)
        await _until(lambda: len(ep.arrivals) >= 20, 5.0)
        assert not reactor.polling
        delays = sorted(_delays(ep, since))
        assert delays[len(delays) // 2] < BATCH * 0.25
        chatty.stop.set()
        async with asyncio.timeout(5):
            assert await ep.done == [None]
    finally:
        reactor.close()


@pytest.mark.parametrize(
    ("batch", "connections", "period", "arrivals"),
    [
        # Woken 2 * TICKS / 3 times a window at most: fewer wake-ups than ticks would be.
        (BATCH, 2, 3 * SWITCH_WINDOW / TICKS, 15),
        # No batch interval: every event at once, however many.
        (0.0, 20, 0.001, 100),
    ],
)
async def test_a_reactor_that_polling_would_not_spare_wake_ups_keeps_waking(
    chatty: Chatty, batch: float, connections: int, period: float, arrivals: int,
) -> None:
    reactor = Reactor(asyncio.get_running_loop(), batch)
    chatty.period = period
    try:
        eps = _open(reactor, chatty.port, connections)
        await _until(lambda: all(len(ep.arrivals) >= arrivals for ep in eps), 10.0)
        assert not reactor.polling
        chatty.stop.set()
        async with asyncio.timeout(5):
            assert await asyncio.gather(*(ep.done for ep in eps)) == [[None]] * connections
    finally:
        reactor.close()


async def test_closing_a_polling_reactor_tells_every_connection_and_stops_the_timer(
    chatty: Chatty,
) -> None:
    reactor = Reactor(asyncio.get_running_loop(), BATCH)
    eps = _open(reactor, chatty.port, 20)
    try:
        await _until(lambda: reactor.polling, 5.0)
    finally:
        reactor.close()
    assert not reactor.polling
    assert all(len(ep.lost) == 1 and isinstance(ep.lost[0], ConnectionAbortedError)
               for ep in eps)
    received = [len(ep.received) for ep in eps]
    await asyncio.sleep(3 * BATCH)  # no tick after the close reads on
    assert [len(ep.received) for ep in eps] == received


def test_a_negative_batch_interval_is_refused() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(ValueError, match="batch"):
            Reactor(loop, -0.001)
    finally:
        loop.close()


async def test_a_busy_prober_polls_and_every_probe_still_gets_its_whole_answer() -> None:
    """Through HttpProber (``polling`` is what the engine's ``upwatch_probe_polling`` gauge
    reads): 20 probes whose answers come a byte every 2 ms turn it to polling; each ends 200,
    read to its end, and the idle prober goes back to waking."""
    prober = HttpProber(timeout=10.0, user_agent=USER_AGENT, allow_private=True, batch=BATCH)
    seen_polling = False
    try:
        async with HttpTarget() as site:
            url = site.url("/slowloris?interval=0.002")
            probes = [asyncio.ensure_future(prober.probe(url)) for _ in range(20)]
            async with asyncio.timeout(10):
                while not all(p.done() for p in probes):
                    seen_polling = seen_polling or prober.polling
                    await asyncio.sleep(0.005)
            outcomes = [p.result() for p in probes]
        assert seen_polling
        assert [(o.status_code, o.error) for o in outcomes] == [(200, None)] * 20
        await _until(lambda: not prober.polling, 5.0)
    finally:
        await prober.aclose()
    assert not prober.polling


def test_the_setting_defaults_to_one_millisecond_and_refuses_what_is_out_of_range(
    tmp_path: Path,
) -> None:
    assert Settings(data_dir=tmp_path).probe_batch_ms == 1.0
    assert Settings(data_dir=tmp_path, probe_batch_ms=0).probe_batch_ms == 0.0
    for bad in (-1, 51):
        with pytest.raises(ValidationError, match="probe_batch_ms"):
            Settings(data_dir=tmp_path, probe_batch_ms=bad)
