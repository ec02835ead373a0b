"""Public service endpoints (/healthz, /metrics) and the failure answers (503, 500)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web

from engine.db.store import Store
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings
from engine.web.app import create_app


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def test_healthz_is_ok_while_the_database_answers(api: str) -> None:
    async with aiohttp.ClientSession(base_url=api) as s, s.get("/healthz") as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "application/json"
        assert await r.json() == {"status": "ok", "overloaded": False}


async def test_metrics_count_requests_by_route_template(
    store: Store, settings: Settings, account: tuple[Any, str],
) -> None:
    metrics = Metrics()
    runner, base = await serve(create_app(store, settings, metrics=metrics))
    _, token = account
    try:
        async with aiohttp.ClientSession(
            base_url=base, headers={"Authorization": f"Bearer {token}"}
        ) as s:
            for path in ("/webapi/monitors/1", "/webapi/monitors/2", "/webapi/monitors"):
                async with s.get(path):
                    pass
            async with s.get("/metrics") as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/plain")
                text = await r.text()
    finally:
        await runner.cleanup()
    assert 'upwatch_http_requests_total{route="/webapi/monitors/{id}",status="404"} 2.0' in text
    assert 'upwatch_http_requests_total{route="/webapi/monitors",status="200"} 1.0' in text


@pytest.fixture
async def dead_store(db_dsn: str) -> AsyncIterator[Store]:
    """A store whose database has gone away."""
    s = await Store.connect(db_dsn, min_size=1, max_size=2)
    s.pool.terminate()
    yield s


async def test_without_a_database_the_api_answers_503(
    dead_store: Store, settings: Settings,
) -> None:
    runner, base = await serve(create_app(dead_store, settings))
    try:
        async with aiohttp.ClientSession(base_url=base) as s:
            async with s.get("/healthz") as r:
                assert r.status == 503
                assert await r.json() == {"status": "unavailable", "overloaded": False}
            async with s.get("/webapi/monitors", headers={"Authorization": "Bearer x"}) as r:
                assert r.status == 503
                assert r.headers["Content-Type"] == "application/json"
                assert await r.json() == {"message": "The service is temporarily unavailable."}
            async with s.get("/metrics") as r:  # metrics do not need the database
                assert r.status == 200
    finally:
        await runner.cleanup()


async def test_an_unexpected_error_is_a_bare_500_and_logged(
    client: aiohttp.ClientSession, store: Store, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(*args: Any, **kw: Any) -> None:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(store, "list_monitors", broken)
    async with client.get("/webapi/monitors") as r:
        assert r.status == 500
        assert r.headers["Content-Type"] == "application/json"
        text = await r.text()
    assert text == '{"message":"Server error."}'
    assert "secret internal detail" in caplog.text
    assert "Traceback" in caplog.text or any(rec.exc_info for rec in caplog.records)


async def test_the_status_page_is_mounted_public_and_behind_fixed_paths(
    client: aiohttp.ClientSession, api: str,
) -> None:
    async with client.post("/webapi/monitors", json={"url": "https://example.com"}) as r:
        identifier = (await r.json())["identifier"]
    async with aiohttp.ClientSession(base_url=api) as s:
        async with s.get(f"/{identifier}") as r:
            assert r.status == 200
            assert r.content_type == "text/html"
        async with s.get(f"/{identifier}.json") as r:
            assert r.status == 200
        async with s.get("/healthz") as r:  # fixed paths win over /{identifier}
            assert await r.json() == {"status": "ok", "overloaded": False}


async def test_a_transaction_conflict_is_a_503_to_retry(
    client: aiohttp.ClientSession, store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def deadlocked(*args: Any, **kw: Any) -> None:
        raise asyncpg.DeadlockDetectedError("deadlock detected")

    monkeypatch.setattr(store, "set_check_enabled", deadlocked)
    async with client.post("/webapi/checks/1/disable") as r:
        assert r.status == 503
        assert r.headers["Retry-After"] == "1"
        assert (await r.json())["message"].endswith("please retry.")
