"""A website that answers as fast as it can, in its own process, for tests that drive the
engine past its capacity: the engine's CPU must be what runs out, not the target's, and the
target must not share the test's loop.

``python -m tests.support.busy_target`` listens on a free loopback port, prints it, answers
every request with a small ``200`` and closes, and exits when its stdin closes.
:func:`busy_target` runs it for the length of a block and yields its base URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n"
          b"Connection: close\r\n\r\nok")


@contextlib.asynccontextmanager
async def busy_target() -> AsyncIterator[str]:
    """The target's base URL (``http://127.0.0.1:PORT``) while the block runs."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.busy_target",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    try:
        port = int((await asyncio.wait_for(proc.stdout.readline(), 30)).decode())
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


class _Answer(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if b"\r\n\r\n" in data:  # a probe's request fits in one read
            self.transport.write(ANSWER)  # type: ignore[attr-defined]
            self.transport.close()


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Answer, "127.0.0.1", 0, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()  # until stdin closes
    server.close()


if __name__ == "__main__":
    import uvloop

    uvloop.run(_serve())
