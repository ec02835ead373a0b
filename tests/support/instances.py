"""Real Upwatch processes for end-to-end tests, and the local servers they talk to.

``Instance`` runs ``python -m engine run`` as a child process with its own settings (region,
port, probe source address) against a shared test database, waits for its ready line, and
stops it with SIGTERM or kills it with SIGKILL. ``RegionalTarget`` is a website whose answer
depends on the client's source address (so one region can see an outage another does not);
``WebhookReceiver`` records every webhook with its raw body and headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from aiohttp import web

from tests.support.metrics import sample
from tests.support.targets import free_port

READY_MARK = "ready at"


@dataclass
class Instance:
    """One ``upwatch run`` child process. An empty ``dsn`` runs it on the embedded default
    (its own PostgreSQL in the data directory); ``data_dir`` defaults to a fresh one."""

    dsn: str
    workdir: Path
    region: str = "local"
    source_address: str | None = None
    role: str = "all"
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: asyncio.subprocess.Process | None = None
    output: list[str] = field(default_factory=list)
    _reader: asyncio.Task[None] | None = None
    data_dir: Path | None = None
    # Runs it under another program (``setpriv ...``).
    prefix: tuple[str, ...] = ()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("UPWATCH_")}
        if self.dsn:
            # Nodes of one installation on the test database share its key for secrets at
            # rest (conftest's); the embedded default keeps its own in its data directory.
            env["UPWATCH_SECRET_KEY"] = os.environ["UPWATCH_SECRET_KEY"]
        env.update(
            {
                "UPWATCH_DATABASE_URL": self.dsn,
                "UPWATCH_DATA_DIR": str(
                    self.data_dir or self.workdir / f"data-{self.region}-{self.port}"
                ),
                "UPWATCH_HOST": "127.0.0.1",
                "UPWATCH_PORT": str(self.port),
                "UPWATCH_REGION": self.region,
                "UPWATCH_ALLOW_PRIVATE_TARGETS": "true",
                "UPWATCH_LOG_LEVEL": "INFO",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if not self.dsn:
            del env["UPWATCH_DATABASE_URL"]
        if self.source_address:
            env["UPWATCH_PROBE_SOURCE_ADDRESS"] = self.source_address
        env.update(self.env)
        return env

    async def start(self, timeout: float = 30.0) -> Instance:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = await asyncio.create_subprocess_exec(
            *self.prefix,
            sys.executable,
            "-m",
            "engine",
            "run",
            "--role",
            self.role,
            env=self.environment(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        ready = asyncio.Event()

        async def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            async for raw in self.proc.stdout:
                line = raw.decode(errors="replace").rstrip()
                self.output.append(line)
                if READY_MARK in line:
                    ready.set()

        self._reader = asyncio.create_task(read())
        waiter = asyncio.create_task(ready.wait())
        exited = asyncio.create_task(self.proc.wait())
        await asyncio.wait([waiter, exited], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        exited.cancel()
        if not ready.is_set():
            await self.kill()
            raise AssertionError(
                f"instance {self.region} did not become ready:\n" + "\n".join(self.output[-40:])
            )
        return self

    async def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        finally:
            await self._finish_reader()
        return code

    async def kill(self) -> None:
        """SIGKILL: no shutdown code runs (a crash)."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        await self._finish_reader()

    async def _finish_reader(self) -> None:
        if self._reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._reader, 5)

    def log_text(self) -> str:
        return "\n".join(self.output)


@dataclass
class Hit:
    body: bytes
    headers: dict[str, str]
    at: float


class _LoopbackServer:
    """An aiohttp app served on a free 127.0.0.1 port for the life of an ``async with``."""

    def __init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self.port = 0

    def _routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Any:
        app = web.Application()
        self._routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


class WebhookReceiver(_LoopbackServer):
    """A real HTTP receiver on loopback that records each POST; ``status`` is its answer."""

    def __init__(self) -> None:
        super().__init__()
        self.hits: list[Hit] = []
        self.status = 200

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/hook", self._handle)

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.hits.append(Hit(body, dict(request.headers), time.time()))
        return web.Response(status=self.status, text="ok")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


class RegionalTarget(_LoopbackServer):
    """A website whose status depends on the client address: ``failing_for`` holds the
    source addresses that get ``fail_status`` (0 = close the connection without answering);
    everyone else gets 200. Records which addresses probed it."""

    def __init__(self) -> None:
        super().__init__()
        self.failing_for: set[str] = set()
        self.fail_status = 503
        self.seen: list[tuple[str, float]] = []

    def _routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        peer = request.remote or ""
        self.seen.append((peer, time.time()))
        if peer in self.failing_for:
            if self.fail_status == 0:
                assert request.transport is not None
                request.transport.close()
                raise web.HTTPInternalServerError
            return web.Response(status=self.fail_status, text="down")
        return web.Response(status=200, text="up")

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


async def fetch(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def metric(
    http: aiohttp.ClientSession, inst: Instance, name: str, **labels: str
) -> float:
    """The sample ``name`` (the first whose labels include ``labels``) on ``inst``'s
    ``/metrics``; 0.0 when it is not there (:func:`tests.support.metrics.sample`)."""
    async with http.get(f"{inst.base_url}/metrics") as r:
        return sample(await r.text(), name, **labels)

