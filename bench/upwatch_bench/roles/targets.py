"""Loopback targets (a child role): fast fixed answers, hostile behaviours, a webhook receiver.

Several target processes serve the same sockets (``SO_REUSEPORT``: the kernel spreads
connections over them), so the targets are not what limits a run. Behaviours, chosen per
listening socket:

=============  ==================================================================
``ok``         reads the request head, answers a fixed small 200, closes
``tls``        the same over TLS (the bench CA's certificate)
``tls_hang``   TLS handshake, then never answers (in-flight HTTPS memory)
``slow``       answers the 200 after ``slow_s`` seconds (degraded: past the slow threshold)
``hang``       accepts, never answers
``refuse``     bound but not listening: every connect is refused at once
``hook``       webhook receiver: reads the whole request, records ``X-Service-Webhook``
               and the wall-clock time of its 200, answers 200, closes
=============  ==================================================================

Raw ``asyncio.Protocol`` on uvloop: no framework cost per connection. Every hanging
connection is cut after ``hang_cap_s`` so nothing is held forever.

Commands (stdin): ``stats`` (emit connection counts), ``dump`` (write the receiver's
records to ``record`` as JSON and emit ``dumped``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import ssl
import time
from array import array
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from upwatch_bench.child import commands, emit

OK_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n"
    b"Connection: close\r\n\r\nok"
)
HOOK_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _fixed(body: bytes, content_type: str) -> bytes:
    return (f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}"
            "\r\nConnection: close\r\n\r\n").encode("ascii") + body


# The assertions scenario (upwatch_bench/scenarios/assertions.py): a 100 KiB JSON document whose
# "status" is "UP", and a 1 MiB body built to be hard for backtracking regexes
# ("(a+)+$" against a...!).
_JSON_100K = b'{"status": "UP", "pad": "' + b"x" * (100 * 1024 - 29) + b'"}'
RESPONSES: dict[str, bytes] = {
    "json100k": _fixed(_JSON_100K, "application/json"),
    "bomb1m": _fixed(b"a" * ((1 << 20) - 1) + b"!", "text/plain"),
}
MAX_HEAD = 64 * 1024
BACKLOG = 4096


class _Stats:
    def __init__(self) -> None:
        self.connections: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        # Receiver records: event id and the wall-clock time its 200 was written.
        self.hook_ids: array[int] = array("q")
        self.hook_times: array[float] = array("d")


class _Answer(asyncio.Protocol):
    """ok / tls / slow / hang / tls_hang: read the request head, then act per mode."""

    __slots__ = ("_buf", "_delay", "_mode", "_stats", "_t", "_timer")

    def __init__(self, mode: str, stats: _Stats, delay: float) -> None:
        self._mode = mode
        self._stats = stats
        self._buf = b""
        self._t: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._delay = delay

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._t = transport  # type: ignore[assignment]
        self._stats.connections[self._mode] += 1
        if self._mode in ("hang", "tls_hang"):
            self._timer = asyncio.get_running_loop().call_later(self._delay, self._cut)

    def data_received(self, data: bytes) -> None:
        t = self._t
        if t is None or self._mode in ("hang", "tls_hang"):
            return
        buf = self._buf + data if self._buf else data
        if b"\r\n\r\n" not in buf:
            if len(buf) > MAX_HEAD:
                t.abort()
            else:
                self._buf = buf
            return
        self._buf = b""
        if self._mode == "slow":
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(self._delay, self._answer)
            return
        self._answer()

    def _answer(self) -> None:
        t = self._t
        if t is not None and not t.is_closing():
            t.write(RESPONSES.get(self._mode, OK_RESPONSE))
            t.close()
            self._stats.answered[self._mode] += 1

    def _cut(self) -> None:
        if self._t is not None:
            self._t.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._t = None


class _Hook(asyncio.Protocol):
    """The webhook receiver: one request per connection (the deliverer never reuses one)."""

    def __init__(self, stats: _Stats) -> None:
        from httptools import HttpRequestParser

        self._stats = stats
        self._t: asyncio.Transport | None = None
        self._event_id = -1
        self._parser: Any = HttpRequestParser(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._t = transport  # type: ignore[assignment]
        self._stats.connections["hook"] += 1

    def data_received(self, data: bytes) -> None:
        from httptools import HttpParserError

        parser = self._parser
        if parser is None:
            return
        try:
            parser.feed_data(data)
        except HttpParserError:
            if self._t is not None:
                self._t.abort()

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"x-service-webhook":
            with contextlib.suppress(ValueError):
                self._event_id = int(value)

    def on_message_complete(self) -> None:
        t = self._t
        if t is None:
            return
        t.write(HOOK_RESPONSE)
        t.close()
        st = self._stats
        st.answered["hook"] += 1
        st.hook_ids.append(self._event_id)
        st.hook_times.append(time.time())

    def connection_lost(self, exc: Exception | None) -> None:
        self._t = None
        self._parser = None  # parser -> bound methods -> self


def listen_socket(host: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind((host, port))
    s.setblocking(False)
    return s


async def _serve(cfg: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    stats = _Stats()
    tls: ssl.SSLContext | None = None
    if cfg.get("cert"):
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cfg["cert"], cfg["key"])
    slow_s = float(cfg.get("slow_s", 4.0))
    hang_cap = float(cfg.get("hang_cap_s", 120.0))
    held: list[socket.socket] = []
    servers: list[asyncio.AbstractServer] = []
    for host, port, mode in cfg["binds"]:
        sock = listen_socket(host, int(port))
        if mode == "refuse":
            held.append(sock)  # bound, never listening: connects are refused
            continue
        ctx = tls if mode in ("tls", "tls_hang") else None
        factory: Callable[[], asyncio.Protocol]
        if mode == "hook":
            factory = functools.partial(_Hook, stats)
        else:
            delay = slow_s if mode == "slow" else hang_cap
            factory = functools.partial(_Answer, mode, stats, delay)
        servers.append(await loop.create_server(factory, sock=sock, ssl=ctx, backlog=BACKLOG))
    emit("ready", sockets=len(servers) + len(held))
    try:
        async for msg in commands():
            cmd = msg.get("cmd")
            if cmd == "stats":
                emit("stats", connections=dict(stats.connections), answered=dict(stats.answered))
            elif cmd == "dump":
                data = orjson.dumps({
                    "ids": stats.hook_ids.tolist(), "times": stats.hook_times.tolist(),
                })
                await asyncio.to_thread(Path(cfg["record"]).write_bytes, data)
                emit("dumped", count=len(stats.hook_ids))
            elif cmd == "stop":
                break
    finally:
        for srv in servers:
            srv.close()
        for s in held:
            s.close()


def run(cfg: dict[str, Any]) -> int:
    import uvloop

    uvloop.run(_serve(cfg))
    return 0
