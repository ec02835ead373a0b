"""Concurrent creates of one account share transactions (engine.web.api.create_combiner) and still
stop exactly at the plan's monitor limit, across API processes and beside a running apply."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.runtime.settings import Plan, Settings
from engine.web.app import create_app
from tests.support.web import serve

LIMIT = 20


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data", allow_private_targets=True, port=0,
        base_url="http://127.0.0.1:8080", rate_limit_per_second=0, api_concurrency=64,
        plans={"default": Plan(monitor_limit=LIMIT)},
    )


async def _race(bases: list[str], token: str, n: int, tag: str) -> list[tuple[int, Any]]:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        async def create(i: int) -> tuple[int, Any]:
            url = f"{bases[i % len(bases)]}/webapi/monitors"
            async with http.post(url, json={"url": f"https://{tag}{i}.example/"}) as r:
                return r.status, await r.json()

        return list(await asyncio.gather(*(create(i) for i in range(n))))


async def test_two_api_processes_racing_at_the_limit_create_exactly_the_limit(
    db_dsn: str, store: Store, settings: Settings,
) -> None:
    account, token = await store.create_account("racer")
    # Two API instances, each with its own pool and its own combiner, as two processes.
    other = await Store.connect(db_dsn, min_size=1, max_size=10)
    try:
        async with serve(create_app(store, settings)) as a, \
                serve(create_app(other, settings)) as b:
            # Some monitors already there: the limit counts them.
            first = await _race([a], token, 7, "pre")
            assert [s for s, _ in first] == [201] * 7
            results = await _race([a, b], token, 60, "race")
    finally:
        await other.close()
    created = [body for status, body in results if status == 201]
    refused = [body for status, body in results if status != 201]
    assert len(created) == LIMIT - 7
    assert all(body["errors"] == {"monitor_limit": [
        f"The account has reached its limit of {LIMIT} monitors."]} for body in refused)
    async with store.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id, url FROM monitors WHERE account_id = $1 ORDER BY id", account.id)
        checks = await conn.fetchval(
            "SELECT count(*) FROM checks c JOIN monitors m ON m.id = c.monitor_id"
            " WHERE m.account_id = $1", account.id)
        periods = await conn.fetchval("SELECT count(*) FROM check_periods WHERE ended_at IS NULL")
    assert len(rows) == LIMIT
    assert checks == 3 * LIMIT  # uptime, certificate and domain checks
    assert periods == 3 * LIMIT  # every new check enabled, with its open period
    # Every 201 names a monitor that is there, with the URL it was asked for.
    by_id = {r["id"]: r["url"] for r in rows}
    assert all(by_id[body["id"]] == body["url"] for body in created)
    assert all(body["checks"]["uptime"]["status"] == "pending" for body in created)


async def test_creates_of_one_account_do_not_wait_on_another_accounts_limit(
    store: Store, settings: Settings,
) -> None:
    full, full_token = await store.create_account("full")
    other, other_token = await store.create_account("other")
    async with serve(create_app(store, settings)) as a:
        await _race([a], full_token, LIMIT, "full")
        results = await asyncio.gather(
            _race([a], full_token, 10, "more"), _race([a], other_token, 10, "other"))
    assert [s for s, _ in results[0]] == [422] * 10
    assert [s for s, _ in results[1]] == [201] * 10
    assert await store.count_monitors(full.id) == LIMIT
    assert await store.count_monitors(other.id) == 10


async def test_a_create_for_a_deleted_account_is_not_found(store: Store) -> None:
    from engine.monitors.plan import CheckSettings, MonitorSpec

    account, _ = await store.create_account("gone")
    async with store.pool.acquire() as conn:
        await conn.execute("DELETE FROM accounts WHERE id = $1", account.id)
    spec = MonitorSpec(None, "https://x.example/", "https", "x.example", "", "x",
                       {"uptime": CheckSettings(30, 0, True),
                        "certificate_health": CheckSettings(3600, 0, True)})
    from engine.runtime.errors import NotFound

    with pytest.raises(NotFound):
        await store.create_monitors(account.id, [(spec, 10)])
