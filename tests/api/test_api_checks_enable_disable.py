"""Checks: update, enable and disable, with the engine told about every change."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import aiohttp
import asyncpg

from engine.db.store import Store


async def create(client: aiohttp.ClientSession, **body: Any) -> dict[str, Any]:
    async with client.post("/webapi/monitors", json={"url": "https://example.com", **body}) as r:
        assert r.status == 201
        data: dict[str, Any] = await r.json()
        return data


async def check_row(store: Store, check_id: int) -> asyncpg.Record:
    async with store.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT * FROM checks WHERE id = $1", check_id)
    assert row is not None
    return row


async def periods(store: Store, check_id: int) -> list[asyncpg.Record]:
    async with store.pool.acquire() as conn:
        return await conn.fetch(
            "SELECT started_at, ended_at FROM check_periods WHERE check_id = $1"
            " ORDER BY started_at", check_id)


async def call(client: aiohttp.ClientSession, method: str, path: str, **kw: Any) -> Any:
    async with client.request(method, path, **kw) as r:
        assert r.status == 200, await r.text()
        assert r.headers["Content-Type"] == "application/json"
        return await r.json()


async def test_disable_pauses_and_enable_makes_pending(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client)
    cid = m["checks"]["uptime"]["id"]
    assert await call(client, "POST", f"/webapi/checks/{cid}/disable") == {
        "id": cid, "is_enabled": False, "status": "paused"}
    row = await check_row(store, cid)
    assert (row["is_enabled"], row["status"], row["config_version"]) == (False, "paused", 2)
    [p] = await periods(store, cid)
    assert p["ended_at"] is not None

    assert await call(client, "POST", f"/webapi/checks/{cid}/enable") == {
        "id": cid, "is_enabled": True, "status": "pending"}
    row = await check_row(store, cid)
    assert (row["is_enabled"], row["status"], row["config_version"]) == (True, "pending", 3)
    ps = await periods(store, cid)
    assert len(ps) == 2 and ps[1]["ended_at"] is None
    # The other check is untouched.
    other = await check_row(store, m["checks"]["certificate_health"]["id"])
    assert (other["status"], other["config_version"]) == ("pending", 1)


async def test_enable_and_disable_are_idempotent(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client)
    cid = m["checks"]["certificate_health"]["id"]
    assert (await call(client, "POST", f"/webapi/checks/{cid}/enable"))["status"] == "pending"
    assert (await check_row(store, cid))["config_version"] == 1
    await call(client, "POST", f"/webapi/checks/{cid}/disable")
    before = await check_row(store, cid)
    assert await call(client, "POST", f"/webapi/checks/{cid}/disable") == {
        "id": cid, "is_enabled": False, "status": "paused"}
    assert await check_row(store, cid) == before
    assert len(await periods(store, cid)) == 1


async def test_disable_ends_the_episode_and_closes_an_open_outage(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client)
    cid = m["checks"]["uptime"]["id"]
    async with store.pool.acquire() as conn:
        oid = await conn.fetchval(
            "INSERT INTO outages (check_id, started_at, http_status_code)"
            " VALUES ($1, now() - interval '5 minutes', 500) RETURNING id", cid)
        await conn.execute(
            "UPDATE checks SET status='down', error='HTTP 500', failing_since=now(),"
            " detected_by='local', outage_id=$2, last_check_at=now(),"
            " meta='{\"http_status_code\": 500}' WHERE id=$1", cid, oid)
    await call(client, "POST", f"/webapi/checks/{cid}/disable")
    row = await check_row(store, cid)
    assert row["failing_since"] is None and row["outage_id"] is None and row["error"] is None
    assert row["last_check_at"] is not None  # history stays
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT ended_at FROM outages WHERE id=$1", oid) is not None
    full = await call(client, "GET", f"/webapi/monitors/{m['id']}")
    assert full["checks"]["uptime"]["meta"]["offline_since"] is None
    assert full["checks"]["uptime"]["meta"]["http_status_code"] == 500


async def test_check_update_sets_interval_and_threshold(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client)
    cid = m["checks"]["uptime"]["id"]
    body = await call(client, "PUT", f"/webapi/checks/{cid}",
                      json={"interval": 300, "notification_threshold": 600})
    assert body == {"id": cid, "status": "pending", "interval": 300, "is_enabled": True,
                    "notification_threshold": 600, "last_check_at": None}
    assert (await check_row(store, cid))["config_version"] == 2
    full = await call(client, "GET", f"/webapi/monitors/{m['id']}")
    assert full["checks"]["uptime"]["interval"] == 300
    assert full["checks"]["uptime"]["notification_threshold"] == 600


async def test_check_update_with_an_empty_body_changes_nothing(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client, interval=60)
    cid = m["checks"]["uptime"]["id"]
    for kw in ({"json": {}}, {"data": b""}, {"json": {"interval": 60}},
               {"json": {"interval": None}}):
        body = await call(client, "PUT", f"/webapi/checks/{cid}", **kw)
        assert body["interval"] == 60 and body["notification_threshold"] == 0
    assert (await check_row(store, cid))["config_version"] == 1


async def test_certificate_check_takes_expiry_days_not_notification_threshold(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client)
    cid = m["checks"]["certificate_health"]["id"]
    async with client.put(f"/webapi/checks/{cid}", json={"notification_threshold": 300}) as r:
        assert r.status == 422
        body = await r.json()
    assert list(body["errors"]) == ["notification_threshold"]
    assert "expiry_threshold_days" in body["errors"]["notification_threshold"][0]
    assert (await check_row(store, cid))["config_version"] == 1

    body = await call(client, "PUT", f"/webapi/checks/{cid}",
                      json={"expiry_threshold_days": 14, "interval": 86400})
    assert body["notification_threshold"] == 14 * 86400
    assert body["interval"] == 86400
    row = await check_row(store, cid)
    assert row["notification_threshold_s"] == 14 * 86400
    full = await call(client, "GET", f"/webapi/monitors/{m['id']}")
    assert full["checks"]["certificate_health"]["notification_threshold"] == 14 * 86400
    body = await call(client, "PUT", f"/webapi/checks/{cid}", json={"expiry_threshold_days": 0})
    assert body["notification_threshold"] == 0


async def test_every_check_change_notifies_the_engine(
    client: aiohttp.ClientSession, db_dsn: str,
) -> None:
    m = await create(client)
    cid = m["checks"]["uptime"]["id"]
    listener = await asyncpg.connect(db_dsn)
    got: list[str] = []
    await listener.add_listener("upwatch_checks", lambda *a: got.append(a[3]))
    try:
        await call(client, "PUT", f"/webapi/checks/{cid}", json={"interval": 60})
        await call(client, "PUT", f"/webapi/checks/{cid}", json={"interval": 60})  # no change
        await call(client, "POST", f"/webapi/checks/{cid}/disable")
        await call(client, "POST", f"/webapi/checks/{cid}/disable")  # no change
        await call(client, "POST", f"/webapi/checks/{cid}/enable")
        await listener.execute("SELECT 1")
    finally:
        await listener.close()
    assert got == [str(cid)] * 3


async def test_concurrent_toggles_leave_a_consistent_check(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client)
    cid = m["checks"]["uptime"]["id"]

    async def toggle(i: int) -> None:
        action = "enable" if i % 2 else "disable"
        async with client.post(f"/webapi/checks/{cid}/{action}") as r:
            assert r.status == 200

    await asyncio.gather(*(toggle(i) for i in range(30)))
    row = await check_row(store, cid)
    ps = await periods(store, cid)
    open_periods = [p for p in ps if p["ended_at"] is None]
    assert len(open_periods) == (1 if row["is_enabled"] else 0)
    assert row["status"] == ("pending" if row["is_enabled"] else "paused")
    # Periods never overlap.
    for a, b in itertools.pairwise(ps):
        assert a["ended_at"] is not None and a["ended_at"] <= b["started_at"]
