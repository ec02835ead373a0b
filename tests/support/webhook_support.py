"""A webhook receiver and the deliverer for the delivery tests: the receiver is an aiohttp
server on 127.0.0.1 that records the raw body bytes and headers of every request and answers
200, 500, a redirect, or hangs or closes the connection, as a test chooses; the deliverer runs
on a fast clock (``time_scale``) over events queued with direct SQL."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from engine.db.store import Store
from engine.db.webhook_queue import insert_event
from engine.delivery.webhooks.deliverer import Deliverer
from engine.domain import payloads
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings
from tests.support.metrics import sample

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
SCALE = 0.002  # first retry after 16-20 ms, 24 h are 173 s


# --- the receiver ------------------------------------------------------------------------


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def event_id(self) -> int:
        return int(self.headers["X-Service-Webhook"])

    @property
    def try_number(self) -> int:
        return int(self.headers["X-Service-Current-Try"])

    @property
    def monitor_id(self) -> int:
        return int(orjson.loads(self.body)["monitor"]["id"])


# A behaviour picks the answer for one request: "ok", "slow" (200 after 0.3 s), "500",
# "redirect", "hang" (until release is set), "hold" (until its own gate in holds is set),
# "close".
Behaviour = Callable[[Hit], str]


class Receiver:
    def __init__(self) -> None:
        self.hits: list[Hit] = []
        self.answered: list[tuple[Hit, str]] = []
        self.behaviour: Behaviour = lambda hit: "ok"
        self.release = asyncio.Event()
        self.holds: list[asyncio.Event] = []
        self.inside = 0  # requests being answered now, and the most there were at once
        self.most_inside = 0
        self.base = ""

    def url(self, path: str = "/hook") -> str:
        return self.base + path

    def ok_hits(self) -> list[Hit]:
        return [h for h, answer in self.answered if answer == "ok"]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        hit = Hit(request.path, dict(request.headers), await request.read(), time.monotonic())
        self.hits.append(hit)
        answer = self.behaviour(hit)
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        try:
            return await self._answer(request, hit, answer)
        finally:
            self.inside -= 1

    async def _answer(self, request: web.Request, hit: Hit, answer: str) -> web.StreamResponse:
        if answer == "slow":
            await asyncio.sleep(0.3)
            answer = "ok"
        if answer == "hang":
            await self.release.wait()
            answer = "ok"
        elif answer == "hold":
            gate = asyncio.Event()
            self.holds.append(gate)
            await gate.wait()
            answer = "ok"
        self.answered.append((hit, answer))
        if answer == "ok":
            return web.Response(text="thanks")
        if answer == "500":
            return web.Response(status=500, text="receiver is broken\nright now")
        if answer == "redirect":
            return web.Response(status=302, headers={"Location": "/elsewhere"})
        if answer == "close":
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        raise AssertionError(answer)


@contextlib.asynccontextmanager
async def serving_receiver() -> AsyncIterator[Receiver]:
    """A :class:`Receiver` listening on a free loopback port until the block ends; anything
    it holds is let go first."""
    rec = Receiver()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rec.base = f"http://127.0.0.1:{port}"
    try:
        yield rec
    finally:
        rec.release.set()
        for gate in rec.holds:
            gate.set()
        await runner.cleanup()


# --- helpers -----------------------------------------------------------------------------


def make_settings(tmp_path: Path, **kw: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "allow_private_targets": True,
        "base_url": "http://127.0.0.1:8080",
        "time_scale": SCALE,
        "webhook_timeout": 2.0,
        "webhook_concurrency": 16,
    }
    values.update(kw)
    return Settings(**values)


@contextlib.asynccontextmanager
async def running(
    store: Store, settings: Settings, metrics: Metrics | None = None, **kw: Any
) -> AsyncIterator[Deliverer]:
    deliverer = Deliverer(store, settings, metrics=metrics or Metrics(), **kw)
    stop = asyncio.Event()
    task = asyncio.create_task(deliverer.run(stop))
    try:
        yield deliverer
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


def downtime_body(monitor_id: int) -> bytes:
    return payloads.downtime(
        payloads.MonitorRef(monitor_id, "https://example.com/é?q=1", "ex \"ample\""),
        last_check_at=NOW, error="HTTP 500", http_status_code=500,
        detected_by="eu", verified_via="us",
    )


async def queue(
    store: Store, account_id: int, monitor_id: int, *, event: str = payloads.DOWNTIME,
    body: bytes | None = None, parent_id: int | None = None,
) -> int:
    async with store.pool.acquire() as conn, conn.transaction():
        return await insert_event(
            conn, account_id=account_id, monitor_id=monitor_id, check_id=None, event=event,
            body=body if body is not None else downtime_body(monitor_id), parent_id=parent_id,
        )


async def row(store: Store, event_id: int) -> dict[str, Any]:
    r = await store.pool.fetchrow("SELECT * FROM webhook_events WHERE id = $1", event_id)
    assert r is not None
    return dict(r)


def status_is(store: Store, event_id: int, status: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return (await row(store, event_id))["status"] == status
    return check


def tries_sample(metrics: Metrics, result: str) -> float:
    return sample(metrics, "upwatch_webhook_deliveries_total", result=result)
