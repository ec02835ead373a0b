"""How long a bystander's API requests take while another account does something heavy.

The bystander runs in a child process (``python -m tests.support.latency URL TOKEN PATH``),
so that what the test process itself does (building and sending a 32 MiB body) does not
show up in what it measures: it GETs ``PATH`` one request after another (paced, about a
hundred a second), prints each
duration in seconds on its own line, and exits when its stdin closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator

import aiohttp

MAX_SAMPLES = 20_000
PACE = 0.01  # seconds between one answer and the next request: about 100 GETs a second
READY = "ready"


@contextlib.asynccontextmanager
async def watched(base_url: str, token: str, path: str) -> AsyncIterator[list[float]]:
    """A bystander GETting ``path`` as ``token`` for as long as the block runs; yields the
    list of its request durations (seconds), filled as they complete. Every request must
    answer 200 (the child stops at the first that does not, and the block fails)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.latency", base_url, token, path,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    samples: list[float] = []
    first = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert first.decode().strip() == READY, first

    async def read() -> None:
        assert proc.stdout is not None
        async for line in proc.stdout:
            samples.append(float(line))

    reader = asyncio.create_task(read())
    try:
        yield samples
    finally:
        proc.stdin.close()
        code = await asyncio.wait_for(proc.wait(), 60)
        await reader
    assert code == 0, f"the bystander failed (exit {code})"


async def _poll(base_url: str, token: str, path: str) -> None:
    loop = asyncio.get_running_loop()
    stdin_closed = asyncio.Event()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def watch_stdin() -> None:
        await reader.read()
        stdin_closed.set()

    watcher = asyncio.create_task(watch_stdin())
    headers = {"Authorization": f"Bearer {token}"}
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(base_url=base_url, headers=headers,
                                     timeout=timeout) as s:
        async with s.get(path) as r:  # a connection, and the account's token, warmed
            await r.read()
        print(READY, flush=True)
        for _ in range(MAX_SAMPLES):
            if stdin_closed.is_set():
                break
            started = time.perf_counter()
            async with s.get(path) as r:
                await r.read()
                if r.status != 200:
                    raise SystemExit(f"GET {path}: {r.status}")
            print(f"{time.perf_counter() - started:.6f}", flush=True)
            await asyncio.sleep(PACE)
        await stdin_closed.wait()
    watcher.cancel()


if __name__ == "__main__":
    asyncio.run(_poll(sys.argv[1], sys.argv[2], sys.argv[3]))
