"""Loopback TCP servers for the tcp/tls/mail probes: ones that greet, echo, stall, flood,
speak TLS, and IMAP/POP3 servers with STARTTLS; aiosmtpd for SMTP."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def stream_server(
    handler: Handler, *, host: str = "127.0.0.1", ssl_context: ssl.SSLContext | None = None,
    port: int = 0,
) -> AsyncIterator[int]:
    """Serve ``handler`` on ``host`` and ``port`` (0: a free one), yielding the port; every
    connection is closed and its handler cancelled on the way out."""
    tasks: set[asyncio.Task[None]] = set()

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)  # type: ignore[arg-type]
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            tasks.discard(task)  # type: ignore[arg-type]
            writer.close()

    server = await asyncio.start_server(run, host, port, ssl=ssl_context, reuse_address=True)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for t in list(tasks):
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Says hello and waits for the client to go."""
    writer.write(b"SSH-2.0-OpenSSH_9.2 upwatch-test\r\n")
    await writer.drain()
    await reader.read()


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Sends back every byte it gets, the connection kept open."""
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()


async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Accepts and never says a word."""
    await reader.read()


async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Sends without end (as fast as the client reads)."""
    chunk = b"x" * 65536
    for _ in range(100_000):  # bounded: 6.5 GB, far past any probe
        writer.write(chunk)
        await writer.drain()


def line_server(
    greeting: bytes, answers: dict[bytes, bytes], tls: ssl.SSLContext | None,
    starttls: bytes = b"",
) -> Handler:
    """A line protocol server: sends ``greeting``, answers each command line found in
    ``answers`` (by its first word, upper case), and starts TLS with ``tls`` after
    answering the command ``starttls``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(greeting)
        await writer.drain()
        for _ in range(20):
            line = await reader.readline()
            if not line:
                return
            words = line.strip().upper().split()
            key = b" ".join(words[:2]) if words[:1] == [b"A1"] else (words[0] if words else b"")
            writer.write(answers.get(key, b"500 unknown\r\n"))
            await writer.drain()
            if key == starttls and tls is not None:
                await writer.start_tls(tls)
                await reader.read()  # the probe leaves after the handshake
                return

    return handle
