"""A plain create (small body, no new pattern to compile) is validated on the loop and answers
while the validation thread is busy; a create that would compile a new pattern, or whose body
is large, still waits its turn on that thread (engine.monitors.offloop), and holds none of the
API's request slots meanwhile (engine.web.concurrency)."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.monitors.offloop import off_loop
from engine.runtime.settings import Settings
from engine.web.app import create_app
from tests.support.web import serve

HELD_S = 10.0  # the longest the validation thread is held; every test releases it sooner


@pytest.fixture
async def api(store: Store, tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    settings = Settings(data_dir=tmp_path / "data", allow_private_targets=True, port=0,
                        base_url="http://127.0.0.1:8080", rate_limit_per_second=0,
                        api_concurrency=1)
    _, token = await store.create_account("plain")
    async with serve(create_app(store, settings)) as base, aiohttp.ClientSession(
            base_url=base, headers={"Authorization": f"Bearer {token}"}) as client:
        yield client


@pytest.fixture
async def held_thread() -> AsyncIterator[threading.Event]:
    """The single-monitor validation thread, busy until the event is set."""
    gate = threading.Event()
    busy = asyncio.ensure_future(off_loop(lambda: gate.wait(HELD_S)))
    try:
        yield gate
    finally:
        gate.set()
        await busy


async def _post(client: aiohttp.ClientSession, body: dict[str, Any]) -> tuple[int, Any]:
    async with client.post("/webapi/monitors", json=body) as r:
        return r.status, await r.json()


async def test_a_plain_create_answers_while_the_validation_thread_is_busy(
    api: aiohttp.ClientSession, held_thread: threading.Event,
) -> None:
    plain = {"url": "https://plain.example/health", "alias": "plain",
             "assertions": [{"source": "status_code", "comparison": "equals", "target": 200}]}
    status, body = await asyncio.wait_for(_post(api, plain), 2.0)
    assert status == 201, body
    assert body["url"] == "https://plain.example/health"
    # A bad plain body is refused from the loop too, in words.
    status, body = await asyncio.wait_for(_post(api, {"url": "ftp://x.example/"}), 2.0)
    assert status == 422 and "url" in body["errors"]


@pytest.mark.parametrize("costly", [
    {"url": "https://new-pattern.example/",
     "assertions": [{"source": "body", "comparison": "matches",
                     "target": f"ok-{secrets.token_hex(8)}[0-9]+"}]},
    {"url": "https://new-path.example/",
     "assertions": [{"source": "json", "property": f"$.s{secrets.token_hex(8)}",
                     "comparison": "not_empty"}]},
    {"url": "https://large.example/", "alias": "x" * 5000},
], ids=["new-regex", "new-jsonpath", "large-body"])
async def test_a_costly_create_still_waits_for_the_validation_thread(
    api: aiohttp.ClientSession, held_thread: threading.Event, costly: dict[str, Any],
) -> None:
    create = asyncio.ensure_future(_post(api, costly))
    done, _ = await asyncio.wait({create}, timeout=0.5)
    assert not done, "validated without the validation thread"
    # Waiting for the thread, it holds none of the API's slots (one here): others are served.
    async with api.get("/webapi/monitors") as r:
        assert r.status == 200
    held_thread.set()
    status, body = await asyncio.wait_for(create, 5.0)
    if "alias" in costly:
        assert status == 422 and "alias" in body["errors"], body
        return
    assert status == 201, body
    # Sent again, its pattern is in the cache: the loop validates it while the thread is busy.
    gate = threading.Event()
    busy = asyncio.ensure_future(off_loop(lambda: gate.wait(HELD_S)))
    try:
        status, body = await asyncio.wait_for(_post(api, costly), 2.0)
        assert status == 201, body
    finally:
        gate.set()
        await busy
