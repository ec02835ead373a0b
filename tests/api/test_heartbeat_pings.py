"""Ping endpoints as Healthchecks and Uptime Kuma clients call them: every path and method,
rid runs, bodies cut at the limit, slug pings, 404s that write nothing, and the flood limit.
No token: the pings go through a session without one."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.db.heartbeats import IncomingPing
from engine.db.store import Store
from engine.domain import heartbeat as hb


async def create(client: aiohttp.ClientSession, **body: Any) -> dict[str, Any]:
    async with client.post("/webapi/monitors", json={"type": "heartbeat", **body}) as r:
        assert r.status == 201, await r.text()
        data: dict[str, Any] = await r.json()
        return data


@pytest.fixture
async def anon(api: str) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=api) as s:
        yield s


async def pings(store: Store, check_id: int) -> list[asyncpg.Record]:
    async with store.pool.acquire() as conn:
        return await conn.fetch(
            "SELECT kind, exit_status, rid, method, body, body_cut, failure"
            " FROM heartbeat_pings WHERE check_id = $1 ORDER BY id", check_id)


async def heartbeat_row(store: Store, check_id: int) -> asyncpg.Record:
    async with store.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT * FROM heartbeats WHERE check_id = $1", check_id)
    assert row is not None
    return row


def _path(m: dict[str, Any]) -> str:
    return "/ping/" + m["ping_url"].rsplit("/", 1)[1]


async def test_every_path_and_method_answers_ok_and_is_in_the_database(
    client: aiohttp.ClientSession, anon: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client, alias="job", period=3600, grace=300)
    cid, path = m["checks"]["heartbeat"]["id"], _path(m)
    calls = [("GET", ""), ("HEAD", ""), ("POST", ""), ("GET", "/start"), ("POST", "/0"),
             ("GET", "/log"), ("POST", "/fail"), ("GET", "/2")]
    for method, suffix in calls:
        async with anon.request(method, path + suffix, data=b"out" if method == "POST" else None
                                ) as r:
            assert r.status == 200, (method, suffix)
            assert r.headers["Ping-Body-Limit"] == "10000"
            if method != "HEAD":
                assert await r.text() == "OK"
    got = [(p["kind"], p["exit_status"], p["method"]) for p in await pings(store, cid)]
    assert got == [("success", None, "GET"), ("success", None, "HEAD"),
                   ("success", None, "POST"), ("start", None, "GET"), ("success", 0, "POST"),
                   ("log", None, "GET"), ("fail", None, "POST"), ("fail", 2, "GET")]
    rows = await pings(store, cid)
    assert rows[2]["body"] == "out"
    assert rows[7]["failure"] == "exit status 2"
    hb = await heartbeat_row(store, cid)
    assert hb["last_exit_status"] == 2 and hb["failure_reason"] == "exit status 2"
    # The API shows the facts in the check's meta.
    async with client.get(f"/webapi/monitors/{m['id']}") as r:
        meta = (await r.json())["checks"]["heartbeat"]["meta"]
    assert meta["last_exit_status"] == 2 and meta["last_ping_at"] is not None
    assert meta["last_start_at"] is not None and meta["last_body"] == "out"


async def test_unknown_ids_and_actions_are_404_and_write_nothing(
    client: aiohttp.ClientSession, anon: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client, alias="job", period=3600, grace=300)
    cid = m["checks"]["heartbeat"]["id"]
    for path in (f"/ping/{uuid.uuid4()}", f"/ping/{uuid.uuid4()}/start", "/ping/not-a-uuid",
                 _path(m) + "/256", _path(m) + "/restart", f"/api/push/{uuid.uuid4()}"):
        async with anon.get(path) as r:
            assert r.status == 404, path
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM heartbeat_pings") == 0
    assert (await heartbeat_row(store, cid))["last_ping_at"] is None


async def test_rid_times_overlapping_runs_apart(
    client: aiohttp.ClientSession, anon: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client, alias="job", period=3600, grace=300)
    cid, path = m["checks"]["heartbeat"]["id"], _path(m)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    for suffix, rid in (("/start", a), ("/start", b), ("", b)):
        async with anon.get(path + suffix, params={"rid": rid}) as r:
            assert r.status == 200
    runs = (await heartbeat_row(store, cid))["runs"]
    assert list(runs) == [a]  # b finished, a still runs
    async with anon.get(path, params={"rid": "not-a-uuid"}) as r:
        assert r.status == 400


async def test_a_long_body_is_cut_and_marked_never_refused(
    client: aiohttp.ClientSession, anon: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client, alias="job", period=3600, grace=300)
    cid = m["checks"]["heartbeat"]["id"]
    async with anon.post(_path(m) + "/fail", data=b"x" * 200_000) as r:
        assert r.status == 200
    [row] = await pings(store, cid)
    assert row["body_cut"] is True
    assert row["body"].startswith("x" * 10_000) and "cut" in row["body"][10_000:]


async def test_slug_pings_need_the_accounts_ping_key_and_can_create(
    client: aiohttp.ClientSession, anon: aiohttp.ClientSession, store: Store,
    account: tuple[Any, str],
) -> None:
    m = await create(client, alias="backup", period=86400, grace=3600, slug="db-backup")
    key = await store.ping_key(account[0].id)
    async with anon.get(f"/ping/{key}/db-backup/start") as r:
        assert r.status == 200
    async with anon.get("/ping/wrongwrongwrong1/db-backup") as r:
        assert r.status == 404
    async with anon.get(f"/ping/{key}/new-job") as r:
        assert r.status == 404  # no such slug, and no create=1
    async with anon.get(f"/ping/{key}/new-job", params={"create": "1"}) as r:
        assert r.status == 200
    async with client.get("/webapi/monitors") as r:
        listed = await r.json()
    slugs = sorted(x.get("slug") for x in listed)
    assert slugs == ["db-backup", "new-job"]
    row = await heartbeat_row(store, m["checks"]["heartbeat"]["id"])
    assert row["last_start_at"] is not None


async def test_kuma_push_urls_work_with_the_same_id(
    client: aiohttp.ClientSession, anon: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client, alias="worker", period=300, grace=60)
    cid = m["checks"]["heartbeat"]["id"]
    ping_id = m["ping_url"].rsplit("/", 1)[1]
    async with anon.get(f"/api/push/{ping_id}", params={"status": "up", "msg": "OK",
                                                        "ping": "12"}) as r:
        assert r.status == 200 and await r.json() == {"ok": True}
    async with anon.get(f"/api/push/{ping_id}", params={"status": "down",
                                                        "msg": "queue stuck"}) as r:
        assert r.status == 200
    rows = await pings(store, cid)
    assert [(p["kind"], p["failure"]) for p in rows] == [("success", None),
                                                         ("fail", "queue stuck")]


async def test_a_flood_is_limited_per_heartbeat_and_kind(
    client: aiohttp.ClientSession, anon: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client, alias="job", period=3600, grace=300)
    other = await create(client, alias="other", period=3600, grace=300)

    async def one() -> int:
        async with anon.get(_path(m)) as r:
            return r.status

    statuses = list(await asyncio.gather(*(one() for _ in range(300))))
    assert 429 in statuses and statuses.count(200) >= 120
    # A start of the same heartbeat and any ping of another still get through.
    async with anon.get(_path(m) + "/start") as r:
        assert r.status == 200
    async with anon.get(_path(other)) as r:
        assert r.status == 200
    written = await pings(store, m["checks"]["heartbeat"]["id"])
    assert len(written) == statuses.count(200) + 1


async def test_pings_never_reveal_the_token(
    client: aiohttp.ClientSession, anon: aiohttp.ClientSession, account: tuple[Any, str],
) -> None:
    m = await create(client, alias="job", period=3600, grace=300)
    async with anon.get(_path(m)) as r:
        text = await r.text()
        headers = str(r.headers)
    assert account[1] not in text and account[1] not in headers


async def test_each_heartbeat_keeps_its_newest_pings(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client, alias="job", period=3600, grace=300)
    cid = m["checks"]["heartbeat"]["id"]
    pid = m["ping_url"].rsplit("/", 1)[1]
    for i in range(5):
        p = hb.Ping(hb.LOG, datetime.now(UTC))
        await store.record_pings([IncomingPing(pid, p, "POST", None, f"line {i}", False)],
                                 keep=3)
    assert [r["body"] for r in await pings(store, cid)] == ["line 2", "line 3", "line 4"]


async def test_body_assertions_judge_the_ping_body_in_the_url_monitors_words(
    client: aiohttp.ClientSession, anon: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client, alias="backup", period=86400, grace=3600, assertions=[
        {"source": "json", "property": "$.errors", "comparison": "equals", "target": "0"}])
    assert m["assertions"][0]["property"] == "$.errors"
    cid = m["checks"]["heartbeat"]["id"]
    for body in (b'{"errors": 0, "files": 1200}', b'{"errors": 3}', b"not json"):
        async with anon.post(_path(m), data=body) as r:
            assert r.status == 200
    failures = [p["failure"] for p in await pings(store, cid)]
    assert failures[0] is None
    assert failures[1] is not None and "$.errors" in failures[1]
    assert failures[2] is not None and "not JSON" in failures[2]
    # A heartbeat's assertions read the body only.
    async with client.post("/webapi/monitors", json={
            "type": "heartbeat", "alias": "x", "period": 3600, "assertions": [
                {"source": "status_code", "comparison": "equals", "target": "200"}]}) as r:
        assert r.status == 422
        assert "assertions.0.source" in (await r.json())["errors"]
