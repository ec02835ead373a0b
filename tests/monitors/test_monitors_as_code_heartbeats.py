"""Heartbeats in monitors as code: exported under [[heartbeats]] with their ping ids, applied
to another account they come back with the same ping URLs, a second apply changes nothing,
an edit updates and --prune deletes by key."""

from __future__ import annotations

import tomllib
from typing import Any

import aiohttp

from engine.db.store import Store


async def put(client: aiohttp.ClientSession, doc: Any, **params: str) -> tuple[int, Any]:
    async with client.put("/webapi/monitors", json=doc, params=params) as r:
        return r.status, await r.json()


async def export(client: aiohttp.ClientSession) -> dict[str, Any]:
    async with client.get("/webapi/monitors/export", params={"format": "json"}) as r:
        assert r.status == 200
        data: dict[str, Any] = await r.json()
        return data


async def test_heartbeats_round_trip_keeping_their_ping_ids(
    client: aiohttp.ClientSession, store: Store, api: str,
) -> None:
    async with client.post("/webapi/monitors", json={
            "type": "heartbeat", "alias": "backup", "schedule": "0 3 * * *",
            "time_zone": "Europe/Berlin", "grace": 3600, "max_runtime": 7200}) as r:
        made = await r.json()
    async with client.post("/webapi/monitors", json={"url": "https://a.example/"}) as r:
        assert r.status == 201
    doc = await export(client)
    assert len(doc["monitors"]) == 1
    [beat] = doc["heartbeats"]
    assert beat["ping_uuid"] == made["ping_url"].rsplit("/", 1)[1]
    assert beat["schedule"] == "0 3 * * *" and beat["max_runtime"] == 7200
    async with client.get("/webapi/monitors/export") as r:
        assert tomllib.loads(await r.text()) == doc

    # The same file on a new installation's account: same ping id, so cron lines stay.
    async with store.pool.acquire() as conn:
        await conn.execute("DELETE FROM monitors")
    _, token = await store.create_account("other")
    async with aiohttp.ClientSession(
            base_url=api, headers={"Authorization": f"Bearer {token}"}) as fresh:
        status, body = await put(fresh, doc)
        assert status == 200, body
        assert body["heartbeats"]["created"] == [beat["key"]]
        again = await export(fresh)
        assert again["heartbeats"] == doc["heartbeats"]
        status, body = await put(fresh, doc)
        assert body["heartbeats"] == {"created": [], "updated": [], "deleted": [],
                                      "unchanged": 1}
        # An edit updates; prune deletes what the file no longer names.
        edited = {"monitors": doc["monitors"], "heartbeats": [
            {**beat, "grace": 600}, {"key": "worker", "period": 300, "grace": 120}]}
        status, body = await put(fresh, edited)
        assert body["heartbeats"]["updated"] == [beat["key"]]
        assert body["heartbeats"]["created"] == ["worker"]
        status, body = await put(fresh, {"monitors": doc["monitors"], "heartbeats": [
            {"key": "worker", "period": 300, "grace": 120}]}, prune="true")
        assert body["heartbeats"]["deleted"] == [beat["key"]]
        left = await export(fresh)
        assert [h["key"] for h in left["heartbeats"]] == ["worker"]


async def test_bad_heartbeat_entries_are_422_naming_the_entry(
    client: aiohttp.ClientSession,
) -> None:
    status, body = await put(client, {"heartbeats": [
        {"key": "a", "schedule": "99 * * * *", "grace": 600},
        {"period": 300},
        {"key": "a", "period": 300}]})
    assert status == 422
    assert set(body["errors"]) >= {"heartbeats[0].schedule", "heartbeats[1].key"}
