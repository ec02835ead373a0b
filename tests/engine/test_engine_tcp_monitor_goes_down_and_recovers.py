"""A tcp:// monitor end to end: created through the API, probed by the real engine against
a real loopback server, down when the port stops answering and up again when it is back,
each step a webhook at a local receiver; bad tcp monitors are a 422 naming the field."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from engine.db.store import Store
from engine.delivery.webhooks.deliverer import Deliverer
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings
from tests.support.engine_support import fast_settings, running_engine, wait_status
from tests.support.instances import WebhookReceiver
from tests.support.stream_targets import greet, stream_server
from tests.support.targets import free_port
from tests.support.wait import wait_until


@contextlib.asynccontextmanager
async def delivering(store: Store, settings: Settings) -> AsyncIterator[None]:
    deliverer = Deliverer(store, settings, metrics=Metrics())
    stop = asyncio.Event()
    task = asyncio.create_task(deliverer.run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


def listening(port: int) -> contextlib.AbstractAsyncContextManager[int]:
    """The greeting server on 127.0.0.1:``port`` until the block ends (then: refused)."""
    return stream_server(greet, port=port)


async def uptime_hits(hook: WebhookReceiver, n: int) -> list[dict[str, Any]]:
    bodies = [orjson.loads(h.body) for h in hook.hits]
    hits = [b for b in bodies if b["check"]["name"] == "uptime"]
    return hits if len(hits) >= n else []


async def test_a_tcp_monitor_goes_down_and_recovers_with_webhooks(
    store: Store, client: aiohttp.ClientSession, tmp_path: Path,
) -> None:
    fast = fast_settings(tmp_path)
    port = free_port()
    async with WebhookReceiver() as hook:
        async with client.put("/webapi/account", json={"webhook_url": hook.url}) as r:
            assert r.status == 200, await r.text()
        async with client.post("/webapi/monitors", json={
            "url": f"tcp://127.0.0.1:{port}", "alias": "SSH",
            "assertions": [{"source": "response", "comparison": "contains",
                            "target": "SSH-2.0"}],
        }) as r:
            assert r.status == 201, await r.text()
            created = await r.json()
        assert created["url"] == f"tcp://127.0.0.1:{port}"
        assert set(created["checks"]) == {"uptime"}  # no TLS: no certificate check
        check_id = created["checks"]["uptime"]["id"]
        async with running_engine(store, fast), delivering(store, fast):
            async with listening(port):
                await wait_status(store, check_id, "ok")
            down = await wait_status(store, check_id, "down")
            assert down["error"] == "connection refused"
            hits = await wait_until(lambda: uptime_hits(hook, 1), what="the downtime webhook")
            assert hits[0]["check"]["status"] == "nok"
            assert hits[0]["check"]["error"] == "connection refused"
            async with listening(port):
                await wait_status(store, check_id, "ok")
                hits = await wait_until(lambda: uptime_hits(hook, 2),
                                        what="the restored webhook")
            assert hits[1]["check"]["status"] == "ok"
            assert hits[1]["check"]["meta"]["http_status_code"] == 0  # no HTTP, as downtime


async def test_bad_tcp_monitors_are_refused_naming_the_field(
    client: aiohttp.ClientSession,
) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"url": "tcp://db.example.com"}, "url"),
        ({"url": "tls://db.example.com:5432/path"}, "url"),
        ({"url": "smtp://mail.example.com", "request": {"body": "HELO"}}, "request.body"),
        ({"url": "tcp://db.example.com:5432", "request": {"method": "POST"}},
         "request.method"),
        ({"url": "tcp://db.example.com:5432",
          "assertions": [{"source": "status_code", "comparison": "equals", "target": 200}]},
         "assertions.0.source"),
        ({"url": "tcp://db.example.com:5432",
          "assertions": [{"source": "response", "comparison": "matches", "target": "(x"}]},
         "assertions.0.target"),
    ]
    for body, field in cases:
        async with client.post("/webapi/monitors", json=body) as r:
            text = await r.text()
            assert r.status == 422, (body, text)
            assert field in (await r.json())["errors"], (body, text)
