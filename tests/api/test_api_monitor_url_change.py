"""Changing a monitor's URL: a new host resets history and state; a new path keeps them."""

from __future__ import annotations

from typing import Any

import aiohttp

from engine.db.store import Store

HISTORY = ("probe_results", "check_rollups_hourly", "outages")


async def setup_history(client: aiohttp.ClientSession, store: Store) -> dict[str, Any]:
    async with client.post("/webapi/monitors", json={"url": "https://old.example/a"}) as r:
        m: dict[str, Any] = await r.json()
    up = m["checks"]["uptime"]["id"]
    cert = m["checks"]["certificate_health"]["id"]
    async with store.pool.acquire() as conn:
        for cid in (up, cert):
            await conn.execute(
                "INSERT INTO probe_results (check_id, at, kind, outcome, region)"
                " VALUES ($1, now(), 1, 2, 'local')", cid)
            await conn.execute(
                "INSERT INTO check_rollups_hourly (check_id, hour, probes, responses,"
                " response_ms_sum) VALUES ($1, date_trunc('hour', now()), 10, 10, 1000)", cid)
        oid = await conn.fetchval(
            "INSERT INTO outages (check_id, started_at, http_status_code)"
            " VALUES ($1, now() - interval '1 hour', 503) RETURNING id", up)
        await conn.execute(
            "UPDATE checks SET status='down', error='HTTP 503', last_check_at=now(),"
            " meta='{\"http_status_code\": 503}', failing_since=now() - interval '1 hour',"
            " detected_by='eu', outage_id=$2, incident_event_id=7 WHERE id=$1", up, oid)
        await conn.execute(
            "UPDATE checks SET status='ok', last_check_at=now(), meta='{\"issuer\": \"R3\"}',"
            " renewal_notified_for=now() WHERE id=$1", cert)
    return m


async def history_counts(store: Store) -> dict[str, int]:
    async with store.pool.acquire() as conn:
        return {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in HISTORY}


async def test_a_new_host_deletes_history_and_resets_the_checks(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await setup_history(client, store)
    cert = m["checks"]["certificate_health"]["id"]
    async with client.post(f"/webapi/checks/{cert}/disable") as r:
        assert r.status == 200
    new_url = {"url": "https://NEW.example/a"}
    async with client.put(f"/webapi/monitors/{m['id']}", json=new_url) as r:
        assert r.status == 200
        body = await r.json()
    assert (body["host"], body["url"]) == ("new.example", "https://new.example/a")
    assert body["checks"]["uptime"] == {
        "id": m["checks"]["uptime"]["id"], "status": "pending", "interval": 30, "is_enabled": True}
    assert body["checks"]["certificate_health"]["status"] == "paused"  # paused stays paused
    assert await history_counts(store) == dict.fromkeys(HISTORY, 0)
    async with store.pool.acquire() as conn:
        rows = {r["kind"]: r for r in await conn.fetch("SELECT * FROM checks")}
        open_periods = await conn.fetch(
            "SELECT check_id FROM check_periods WHERE ended_at IS NULL")
        all_periods = await conn.fetchval("SELECT count(*) FROM check_periods")
    up = rows["uptime"]
    for field in ("error", "last_check_at", "failing_since", "detected_by", "outage_id",
                  "incident_event_id"):
        assert up[field] is None, field
    assert up["meta"] == {} and rows["certificate_health"]["meta"] == {}
    assert rows["certificate_health"]["renewal_notified_for"] is None
    assert up["config_version"] == 2
    assert sorted(r["check_id"] for r in open_periods) == [up["id"], rows["domain_expiry"]["id"]]
    assert all_periods == 2
    async with client.get(f"/webapi/monitors/{m['id']}/statistics") as r:
        assert await r.json() == {"uptime_percentage_30d": 100.0, "average_response_time_ms": 0.0,
                                  "checks_run_30d": 0, "outages": []}


async def test_a_new_path_keeps_history_but_tells_the_engine(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await setup_history(client, store)
    before = await history_counts(store)
    async with client.put(f"/webapi/monitors/{m['id']}",
                          json={"url": "https://old.example/b?x=1"}) as r:
        assert r.status == 200
        body = await r.json()
    assert body["url"] == "https://old.example/b?x=1"
    assert body["checks"]["uptime"]["status"] == "down"
    assert await history_counts(store) == before
    async with store.pool.acquire() as conn:
        versions = await conn.fetch("SELECT config_version FROM checks ORDER BY id")
    assert [r["config_version"] for r in versions] == [2, 2, 2]


async def test_an_alias_change_keeps_everything(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await setup_history(client, store)
    before = await history_counts(store)
    async with client.put(f"/webapi/monitors/{m['id']}",
                          json={"alias": "Renamed", "url": "https://OLD.example:443/a"}) as r:
        assert r.status == 200
        assert (await r.json())["alias"] == "Renamed"
    assert await history_counts(store) == before
    async with store.pool.acquire() as conn:
        versions = await conn.fetch("SELECT config_version FROM checks ORDER BY id")
    assert [r["config_version"] for r in versions] == [1, 1, 1]


async def test_a_scheme_change_never_toggles_the_certificate_check(
    client: aiohttp.ClientSession,
) -> None:
    """An https monitor moved to http keeps its enabled certificate check (it now reads the
    host's port 443); an http monitor moved to https keeps its paused one until enabled."""
    async def cert_of(body: dict[str, Any]) -> tuple[bool, str]:
        c = body["checks"]["certificate_health"]
        return c["is_enabled"], c["status"]

    async with client.post("/webapi/monitors", json={"url": "https://a.example/"}) as r:
        secure = await r.json()
    async with client.post("/webapi/monitors", json={"url": "http://b.example/"}) as r:
        plain = await r.json()
    assert await cert_of(secure) == (True, "pending")
    assert await cert_of(plain) == (False, "paused")
    for m, url, expected in ((secure, "http://a.example/", (True, "pending")),
                             (plain, "https://b.example/", (False, "paused"))):
        async with client.put(f"/webapi/monitors/{m['id']}", json={"url": url}) as r:
            assert r.status == 200
            body = await r.json()
        assert body["url"] == url and await cert_of(body) == expected
        async with client.put(f"/webapi/monitors/{m['id']}",
                              json={"url": url.replace(".example", ".example.org")}) as r:
            assert r.status == 200  # a new host resets state, never the enabled flag
            assert await cert_of(await r.json()) == expected
