"""Probe connections as plain non-blocking sockets, driven by an epoll nested in the loop.

A connection is one small object over a socket: ``socket``, ``connect``, one ``epoll_ctl``
to register it edge-triggered for both directions, ``send`` when it is writable
(``getsockopt(SO_ERROR)`` only when epoll reports an error or hang-up), ``recv_into`` until
a read comes back short, and ``close`` (which also drops the registration): 7 system calls
a probe, and no coroutine, future or libuv handle per connection.

How it fits in the event loop: a :class:`Reactor` owns one ``select.epoll`` (the platform's
default selector elsewhere) and registers its descriptor with the loop's ``add_reader``.
When any probe socket is ready, the loop calls :meth:`Reactor._ready` once, which takes up to
``MAX_EVENTS`` events without blocking and hands each to its connection. Nothing blocks:
connects are non-blocking, writes that do not fit wait for ``EPOLLOUT``.

The protocol side is a subset of ``asyncio.BufferedProtocol`` (see :class:`Endpoint`).
Unlike an asyncio transport, ``abort()`` closes the socket at once and calls nothing back.

Events in batches under load: a reactor given a ``batch`` interval (``probe_batch_ms``)
counts its wake-ups. While it is woken more often than once per interval (over windows of
``SWITCH_WINDOW``), it leaves the loop's reader and polls on a timer every ``batch`` seconds
instead, taking what came meanwhile in one pass; once a window brings fewer events than half
its ticks, it goes back to waking for each. A light load is thus timed to the event. Under
load each step of a probe (the connect, the server's flight, the answer) may wait up to one
interval, and its timings include that wait. What waking per event cost, and what batching
saves: docs/performance.md.

A connected socket is closed with a reset (``SO_LINGER`` on, 0 s), as HAProxy closes its
connections to servers: a probe closes once it has what it came for (or at its deadline),
so there is nothing left to deliver, and neither side keeps the connection in TIME_WAIT
(a prober opening thousands of connections a minute to one site would otherwise hold an
ephemeral port per connection for a minute).
"""

from __future__ import annotations

import _socket
import asyncio
import errno
import logging
import os
import select
import selectors
import socket
import struct
from typing import Final, Protocol

log = logging.getLogger(__name__)

_EPOLL: Final = hasattr(select, "epoll")
# Final, so that compiled (engine/runtime/compiled.py) they are read without a dict lookup. The
# second values are the selector fallback's (other systems; level-triggered).
_IN: Final[int] = select.EPOLLIN if _EPOLL else selectors.EVENT_READ
_OUT: Final[int] = select.EPOLLOUT if _EPOLL else selectors.EVENT_WRITE
_ERR_HUP: Final[int] = (select.EPOLLERR | select.EPOLLHUP) if _EPOLL else 0
# The peer's FIN (EPOLLRDHUP), a reset or an error: after the data, a read must see it.
_ENDING: Final[int] = (select.EPOLLERR | select.EPOLLHUP | select.EPOLLRDHUP) if _EPOLL else 0
# Edge-triggered, both directions, from the start: one epoll_ctl per connection. The
# connect's completion is the first EPOLLOUT edge; an answer is an EPOLLIN edge, and reads
# go on until the socket is drained (a short read), as edge triggering requires, and past
# that when the edge also reported the peer's FIN or a reset: the end that came with the
# last data is announced by no further edge. The fallback registers for writing and
# switches to _IN (| _OUT) once connected.
_REGISTER: Final[int] = (
    (select.EPOLLIN | select.EPOLLOUT | select.EPOLLRDHUP | select.EPOLLET) if _EPOLL else _OUT
)

# SO_LINGER {on, 0 s}: close() sends a reset and frees the socket at once.
_LINGER_RESET: Final = struct.pack("ii", 1, 0)
_SOL_SOCKET: Final = socket.SOL_SOCKET
_SO_LINGER: Final = socket.SO_LINGER
_INET: Final = socket.AF_INET
_INET6: Final = socket.AF_INET6
_STREAM_NONBLOCK: Final = socket.SOCK_STREAM | socket.SOCK_NONBLOCK

# Events taken per wake-up; more stay ready in the epoll for the next one (the loop calls
# _ready again while its descriptor is readable). select.epoll.poll allocates an array of
# maxevents 12-byte events on every call: 42 (504 bytes) come from Python's small-object
# allocator, 1,024 (12 KiB) came from malloc's large-request path, which first merges every
# free small chunk of the heap (malloc_consolidate).
MAX_EVENTS: Final = 42
# Reads of one connection per event before the other callbacks of the loop get their turn
# (1 MiB with the probes' 256 KiB buffers).
READS_PER_EVENT: Final = 4
# Seconds over which a batching reactor counts its wake-ups (or, polling, its events)
# before it changes how it waits (see the module's docstring).
SWITCH_WINDOW: Final = 0.1
# Polls of MAX_EVENTS one tick takes at most; events past them wait for the next tick.
POLLS_PER_TICK: Final = 64


class Endpoint(Protocol):
    """What a :class:`Reactor` calls back; ``asyncio.BufferedProtocol``'s methods plus
    ``connection_failed``, called instead of ``connection_made`` when the connect fails."""

    def connection_made(self, transport: SocketTransport) -> None: ...
    def connection_failed(self, exc: OSError) -> None: ...
    def get_buffer(self, sizehint: int) -> memoryview: ...
    def buffer_updated(self, nbytes: int) -> None: ...
    def eof_received(self) -> bool | None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...


class _Selector:  # pragma: no cover - platforms without epoll (macOS for development)
    """The slice of ``select.epoll``'s interface the reactor uses, over ``selectors``."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()

    def fileno(self) -> int:
        return self._sel.fileno()

    def register(self, fd: int, mask: int) -> None:
        self._sel.register(fd, mask)

    def modify(self, fd: int, mask: int) -> None:
        self._sel.modify(fd, mask)

    def poll(self, timeout: float, maxevents: int) -> list[tuple[int, int]]:
        return [(key.fd, ev) for key, ev in self._sel.select(timeout)][:maxevents]

    def close(self) -> None:
        self._sel.close()


class Reactor:
    """Client connections of one event loop, on one nested epoll.

    Create it inside the loop it serves; :meth:`close` aborts what is still open and
    detaches it from the loop. Connections opened through it are
    :class:`SocketTransport` objects handed to their endpoint's ``connection_made``.
    """

    __slots__ = (
        "_batch",
        "_closed",
        "_closing",
        "_conns",
        "_count",
        "_dispatching",
        "_ep",
        "_poll",
        "_tick_handle",
        "_window_end",
        "loop",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, batch: float = 0.0) -> None:
        """``batch``: the polling interval in seconds under load (module docstring);
        0 wakes for every ready socket whatever the load."""
        if batch < 0:
            raise ValueError("batch must not be negative")
        self.loop = loop
        self._ep = select.epoll() if _EPOLL else _Selector()
        self._poll = self._ep.poll
        self._conns: dict[int, SocketTransport] = {}
        # Sockets closed while events are handed out are closed only after the batch: a
        # descriptor number closed mid-batch could be reused by a socket opened in the same
        # batch, which would then receive the closed one's event.
        self._dispatching = False
        self._closing: list[_socket.socket] = []
        self._closed = False
        self._batch = batch
        # The timer of the next poll while polling (None: the loop's reader wakes us).
        self._tick_handle: asyncio.TimerHandle | None = None
        # Wake-ups (waking) or events (polling) in the window ending at _window_end.
        self._count = 0
        self._window_end = 0.0
        loop.add_reader(self._ep.fileno(), self._ready)

    @property
    def polling(self) -> bool:
        """True while events are taken on a timer rather than as they come."""
        return self._tick_handle is not None

    def __len__(self) -> int:
        return len(self._conns)

    def connect(
        self, endpoint: Endpoint, ip: str, port: int, local: tuple[str, int] | None = None
    ) -> SocketTransport:
        """Start connecting to ``ip`` (a literal) and ``port``, from ``local`` when given.

        Raises ``OSError`` for what fails at once (no such source address, network
        unreachable); a refusal or a later failure comes as ``endpoint.connection_failed``.
        """
        if self._closed:
            # An endpoint told of the close may try its next address: refuse at once.
            raise ConnectionAbortedError(errno.ECONNABORTED, "prober closed")
        # _socket.socket, not socket.socket: the latter adds a Python __init__ and close()
        # (2.5 us a connection, measured) and nothing probes use.
        sock = _socket.socket(_INET6 if ":" in ip else _INET, _STREAM_NONBLOCK)
        try:
            if local is not None:
                sock.bind(local)
            err = sock.connect_ex((ip, port))
            if err and err != errno.EINPROGRESS:
                raise OSError(err, os.strerror(err))
            fd = sock.fileno()
            self._ep.register(fd, _REGISTER)
        except BaseException:
            sock.close()
            raise
        transport = SocketTransport(self, sock, fd, endpoint)
        self._conns[fd] = transport
        return transport

    def close(self) -> None:
        """Abort every open connection (each endpoint gets ``connection_lost``) and detach
        from the loop. Connecting through it afterwards raises ``ConnectionAbortedError``."""
        if self._closed:
            return
        self._closed = True
        for transport in list(self._conns.values()):
            transport._lost(ConnectionAbortedError(errno.ECONNABORTED, "prober closed"))
        tick = self._tick_handle
        if tick is not None:
            tick.cancel()
            self._tick_handle = None
        elif not self.loop.is_closed():
            self.loop.remove_reader(self._ep.fileno())
        self._ep.close()

    def _ready(self) -> None:
        """The loop's reader: some probe socket is ready."""
        self._dispatch()
        if self._batch:
            self._count += 1
            now = self.loop.time()
            if now >= self._window_end:
                # More wake-ups than ticks in the window: a tick would take their events
                # with fewer.
                if self._count * self._batch > SWITCH_WINDOW and not self._closed:
                    self.loop.remove_reader(self._ep.fileno())
                    self._tick_handle = self.loop.call_at(now + self._batch, self._tick)
                self._count = 0
                self._window_end = now + SWITCH_WINDOW

    def _tick(self) -> None:
        """The timer while polling: take every event that came since the last tick."""
        self._tick_handle = None
        if self._closed:
            return
        count = 0
        try:
            for _ in range(POLLS_PER_TICK):
                n = self._dispatch()
                count += n
                if n < MAX_EVENTS or self._closed:
                    break
        except Exception:
            # The next tick must come all the same, as the loop calls a failed reader again.
            log.exception("probe reactor poll failed")
        if self._closed:
            return
        self._count += count
        now = self.loop.time()
        if now >= self._window_end:
            # Fewer events than half the window's ticks: back to waking for each.
            waking = self._count * self._batch < SWITCH_WINDOW / 2
            self._count = 0
            self._window_end = now + SWITCH_WINDOW
            if waking:
                # Level-triggered: what became ready since this poll wakes the loop at once.
                self.loop.add_reader(self._ep.fileno(), self._ready)
                return
        self._tick_handle = self.loop.call_at(now + self._batch, self._tick)

    def _dispatch(self) -> int:
        """Hand each ready connection its events (at most MAX_EVENTS); their number."""
        conns = self._conns
        self._dispatching = True
        ready = self._poll(0, MAX_EVENTS)
        try:
            for fd, events in ready:
                transport = conns.get(fd)
                if transport is None:
                    continue
                try:
                    transport._event(events)
                except Exception as exc:
                    # A fault in an endpoint's callback must not stop the other connections.
                    log.exception("probe connection callback failed")
                    transport._lost(exc)
        finally:
            self._dispatching = False
            closing = self._closing
            if closing:
                for sock in closing:
                    sock.close()
                closing.clear()
        return len(ready)

    def _release(self, fd: int, sock: _socket.socket) -> None:
        del self._conns[fd]
        if self._dispatching:
            # Closed after the batch (see _closing). It stays in the epoll until then, which
            # is harmless: a batch reports each descriptor once, and the next poll comes
            # after the close, which removes it (the socket is never duplicated: Python
            # creates it non-inheritable).
            self._closing.append(sock)
        else:
            sock.close()


class SocketTransport:
    """One connection: ``write()`` and ``abort()``, the part of an asyncio transport
    that probes use. Reads go into the endpoint's ``get_buffer()``."""

    __slots__ = ("_connecting", "_endpoint", "_fd", "_pending", "_reactor", "_resuming", "_sock")

    def __init__(
        self, reactor: Reactor, sock: _socket.socket, fd: int, endpoint: Endpoint
    ) -> None:
        self._reactor = reactor
        self._sock: _socket.socket | None = sock
        self._fd = fd
        self._endpoint = endpoint
        self._connecting = True
        self._pending = b""
        self._resuming = False

    def write(self, data: bytes) -> None:
        """Send ``data``; what does not fit now is sent when the socket is writable.
        Errors are reported through ``connection_lost`` later, never from here."""
        sock = self._sock
        if sock is None or not data:
            return
        if self._pending or self._connecting:
            self._pending += data
            return
        try:
            n = sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as exc:
            self._fail_later(exc)
            return
        if n < len(data):
            self._pending = bytes(data[n:])
            if not _EPOLL:  # pragma: no cover - the selector fallback is level-triggered
                self._reactor._ep.modify(self._fd, _IN | _OUT)

    def abort(self) -> None:
        """Close at once with a reset (see the module's docstring); the endpoint is not
        called back."""
        sock = self._sock
        if sock is None:
            return
        self._sock = None
        self._pending = b""
        if not self._connecting:
            # try/except, not contextlib.suppress: three Python calls fewer on every probe.
            try:
                sock.setsockopt(_SOL_SOCKET, _SO_LINGER, _LINGER_RESET)
            except OSError:
                pass
        self._reactor._release(self._fd, sock)

    def is_closing(self) -> bool:
        return self._sock is None

    def _lost(self, exc: Exception) -> None:
        """Abort and tell the endpoint, which must not raise from this (logged if it does)."""
        self.abort()
        try:
            self._endpoint.connection_lost(exc)
        except Exception:
            log.exception("probe connection callback failed")

    def _fail_later(self, exc: OSError) -> None:
        # asyncio never calls a protocol back from inside write(); neither do we.
        self.abort()
        self._reactor.loop.call_soon(self._endpoint.connection_lost, exc)

    def _event(self, events: int) -> None:
        sock = self._sock
        if sock is None:
            return
        if self._connecting:
            # A failed connect always shows as EPOLLERR or EPOLLHUP (tcp_poll), so a clean
            # EPOLLOUT needs no getsockopt; the selector fallback has no such flags.
            if events & _ERR_HUP or not events & _OUT or not _EPOLL:
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err or not events & _OUT:
                    err = err or errno.ECONNREFUSED
                    self.abort()
                    self._endpoint.connection_failed(OSError(err, os.strerror(err)))
                    return
            self._connecting = False
            if not _EPOLL:  # pragma: no cover - the selector fallback is level-triggered
                self._reactor._ep.modify(self._fd, _IN | _OUT if self._pending else _IN)
            self._endpoint.connection_made(self)
            if self._sock is None:
                return
            # An edge reports what is ready now: an answer that came with the connect's
            # completion is not reported again, so it is read below.
        if events & _OUT and self._pending:
            self._flush(sock)
            if self._sock is None:
                return
        if events & ~_OUT:  # readable, hang-up or error: recv tells which
            endpoint = self._endpoint
            for _ in range(READS_PER_EVENT):
                buffer = endpoint.get_buffer(-1)
                try:
                    n = sock.recv_into(buffer)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as exc:
                    self._lost(exc)
                    return
                if not n:
                    self.abort()
                    endpoint.eof_received()
                    endpoint.connection_lost(None)
                    return
                endpoint.buffer_updated(n)
                if self._sock is None:
                    return
                # A short read drained the data; a full one may have left more, and an end
                # reported with this edge is still to be read: no further edge announces
                # either (edge triggering).
                if n < len(buffer) and not events & _ENDING:
                    return
            # Still more: a peer that sends as fast as we read must not hold the event loop.
            # No edge will come for what is already there, so the reading goes on after the
            # other ready callbacks have run (once: one continuation at a time).
            if not self._resuming:
                self._resuming = True
                self._reactor.loop.call_soon(self._resume, events & ~_OUT)

    def _resume(self, events: int) -> None:
        """_event outside a dispatch batch, guarded as Reactor._ready guards it."""
        self._resuming = False
        try:
            self._event(events)
        except Exception as exc:
            log.exception("probe connection callback failed")
            self._lost(exc)

    def _flush(self, sock: _socket.socket) -> None:
        data = self._pending
        try:
            n = sock.send(data)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        self._pending = data[n:]
        if not self._pending and not _EPOLL:  # pragma: no cover - level-triggered fallback
            self._reactor._ep.modify(self._fd, _IN)


__all__ = ["MAX_EVENTS", "READS_PER_EVENT", "Endpoint", "Reactor", "SocketTransport"]
