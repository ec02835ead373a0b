"""The backend of the internet world's nginx, and its hanging site (a child role).

``backend``: HTTP/1.1 with keep-alive on one loopback port; nginx proxies every site to it.
A request for ``/w/<think ms>/<bytes>`` is answered after ``think ms`` with a 200 whose body
has ``bytes`` bytes (capped at ``max_body``; a think time above ``hang_cap_s`` is cut to
it). One request at a time per connection, as nginx sends them. Raw ``asyncio.Protocol`` on
uvloop: no framework cost per request, so the backend is not what limits a run.

``hang``: a socket on the world's ``hang`` address that accepts and never answers (each
connection cut after ``hang_cap_s``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from upwatch_bench.child import commands, emit
from upwatch_bench.roles.targets import listen_socket
from upwatch_bench.world import parse_path

MAX_HEAD = 16 * 1024
_BAD = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


class _Backend(asyncio.Protocol):
    __slots__ = ("_body", "_buf", "_cap", "_stats", "_t", "_timer")

    def __init__(self, body: memoryview, cap_s: float, stats: dict[str, int]) -> None:
        self._body = body
        self._cap = cap_s
        self._stats = stats
        self._buf = b""
        self._t: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._t = transport  # type: ignore[assignment]
        self._stats["connections"] += 1

    def data_received(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD and self._t is not None:
                self._t.abort()
            else:
                self._buf = buf
            return
        self._buf = buf[end + 4:]
        line = buf[:buf.find(b"\r\n")].decode("latin-1")
        parts = line.split(" ")
        asked = parse_path(parts[1]) if len(parts) == 3 else None
        if asked is None:
            self._write(None)
            return
        think_ms, size = asked
        delay = min(self._cap, max(0, think_ms) / 1000.0)
        self._timer = asyncio.get_running_loop().call_later(delay, self._write, size)

    def _write(self, size: int | None) -> None:
        self._timer = None
        t = self._t
        if t is None or t.is_closing():
            return
        if size is None:
            t.write(_BAD)
            return
        size = max(0, min(size, len(self._body)))
        t.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n"
                % size)
        t.write(self._body[:size])
        self._stats["answered"] += 1

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._t = None


class _Hang(asyncio.Protocol):
    def __init__(self, cap_s: float) -> None:
        self._cap = cap_s
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._cap, transport.abort)  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


async def start(cfg: dict[str, Any],
                stats: dict[str, int] | None = None) -> list[asyncio.AbstractServer]:
    """The backend on ``host``:``port`` and, with ``hang`` = [address, port], the hanging
    site, on the running loop; ``stats`` counts connections and answers."""
    loop = asyncio.get_running_loop()
    cap = float(cfg.get("hang_cap_s", 600.0))
    body = memoryview(b"<!doctype html>" + b"x" * int(cfg.get("max_body", 256 * 1024)))
    counts = stats if stats is not None else {}
    counts.update(connections=0, answered=0)
    servers: list[asyncio.AbstractServer] = [await loop.create_server(
        lambda: _Backend(body, cap, counts), sock=listen_socket(cfg["host"], int(cfg["port"])),
        backlog=4096)]
    if cfg.get("hang"):
        host, port = cfg["hang"]
        servers.append(await loop.create_server(
            lambda: _Hang(cap), sock=listen_socket(host, int(port)), backlog=4096))
    return servers


async def _serve(cfg: dict[str, Any]) -> None:
    stats: dict[str, int] = {}
    servers = await start(cfg, stats)
    emit("ready")
    try:
        async for msg in commands():
            if msg.get("cmd") == "stats":
                emit("stats", **stats)
            elif msg.get("cmd") == "stop":
                break
    finally:
        for srv in servers:
            srv.close()


def run(cfg: dict[str, Any]) -> int:
    import uvloop

    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(_serve(cfg))
    return 0
