"""Monitors through the API: create, list, get, update, delete in the shapes of api.md."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import asyncpg

from engine.db.store import Store

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
FULL_CHECK_KEYS = {
    "id", "status", "error", "interval", "is_enabled", "notification_threshold",
    "last_check_at", "meta",
}
UPTIME_META_KEYS = {
    "http_status_code", "average_uptime_percentage", "average_response_time", "offline_since",
}
CERT_META_KEYS = {"issuer", "signature_algorithm", "is_self_signed", "valid_from", "valid_to"}


async def create(client: aiohttp.ClientSession, **body: Any) -> dict[str, Any]:
    async with client.post("/webapi/monitors", json=body) as r:
        assert r.status == 201, await r.text()
        assert r.content_type == "application/json"
        data: dict[str, Any] = await r.json()
        return data


async def test_create_answers_201_with_the_reduced_monitor(client: aiohttp.ClientSession) -> None:
    body = await create(client, url="https://Example.COM", alias="Shop")
    assert set(body) == {
        "id", "identifier", "alias", "scheme", "host", "url", "status_page", "checks"}
    assert isinstance(body["id"], int)
    assert body["alias"] == "Shop"
    assert body["scheme"] == "https"
    assert body["host"] == "example.com"
    assert body["url"] == "https://example.com/"
    assert body["status_page"] == f"http://127.0.0.1:8080/{body['identifier']}"
    assert re.fullmatch(r"[A-Za-z0-9_-]{10,}", body["identifier"])
    # A host name under a registrable domain: its domain_expiry check too.
    assert set(body["checks"]) == {"uptime", "certificate_health", "domain_expiry"}
    up, cert = body["checks"]["uptime"], body["checks"]["certificate_health"]
    for check in (up, cert):
        assert set(check) == {"id", "status", "interval", "is_enabled"}
        assert check["status"] == "pending"
        assert check["is_enabled"] is True
    assert up["interval"] == 30
    assert cert["interval"] == 3600
    assert up["id"] != cert["id"]


async def test_create_defaults_alias_to_host_and_applies_interval_and_threshold(
    client: aiohttp.ClientSession,
) -> None:
    body = await create(client, url="http://example.org:8080/health?x=1", interval=300,
                        notification_threshold=120)
    assert body["alias"] == "example.org"
    assert body["url"] == "http://example.org:8080/health?x=1"
    assert body["checks"]["uptime"]["interval"] == 300
    async with client.get(f"/webapi/monitors/{body['id']}") as r:
        full = await r.json()
    assert full["port"] == "8080"
    assert full["checks"]["uptime"]["notification_threshold"] == 120
    assert full["checks"]["certificate_health"]["notification_threshold"] == 0


async def test_identifiers_are_random_not_sequential(client: aiohttp.ClientSession) -> None:
    ids = {(await create(client, url=f"https://e{i}.example"))["identifier"] for i in range(5)}
    assert len(ids) == 5
    assert all(len(i) >= 10 for i in ids)


async def test_get_returns_the_full_monitor_with_meta_keys_before_the_first_run(
    client: aiohttp.ClientSession,
) -> None:
    created = await create(client, url="https://example.com/")
    async with client.get(f"/webapi/monitors/{created['id']}") as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "application/json"
        body = await r.json()
    assert set(body) == {
        "id", "identifier", "alias", "scheme", "host", "port", "url", "status_page", "checks"}
    assert body["port"] == ""
    up, cert = body["checks"]["uptime"], body["checks"]["certificate_health"]
    assert set(up) == FULL_CHECK_KEYS and set(cert) == FULL_CHECK_KEYS
    assert up["last_check_at"] is None and up["error"] is None
    assert up["meta"] == {
        "http_status_code": None, "average_uptime_percentage": 100.0,
        "average_response_time": 0.0, "offline_since": None,
    }
    assert cert["meta"] == dict.fromkeys(CERT_META_KEYS)
    assert up["id"] == created["checks"]["uptime"]["id"]


async def test_list_returns_every_monitor_of_the_account_in_the_full_shape(
    client: aiohttp.ClientSession,
) -> None:
    async with client.get("/webapi/monitors") as r:
        assert r.status == 200
        assert await r.json() == []
    a = await create(client, url="https://a.example")
    b = await create(client, url="https://b.example")
    async with client.get("/webapi/monitors") as r:
        listed = await r.json()
    assert [m["id"] for m in listed] == [a["id"], b["id"]]
    async with client.get(f"/webapi/monitors/{b['id']}") as r:
        assert listed[1] == await r.json()


async def test_meta_shows_the_engine_facts(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    created = await create(client, url="https://example.com/")
    up_id = created["checks"]["uptime"]["id"]
    cert_id = created["checks"]["certificate_health"]["id"]
    async with store.pool.acquire() as conn:
        await conn.execute(
            "UPDATE checks SET status='down', error='HTTP 503', meta=$2,"
            " last_check_at='2026-03-01 10:00:05+00' WHERE id=$1",
            up_id, {"http_status_code": 503})
        await conn.execute(
            "UPDATE checks SET status='ok', meta=$2, last_check_at='2026-03-01 10:00:00+00'"
            " WHERE id=$1",
            cert_id,
            {"issuer": "R3", "signature_algorithm": "sha256WithRSAEncryption",
             "is_self_signed": False, "valid_from": "2026-01-01T00:00:00+00:00",
             "valid_to": "2026-04-01 00:00:00"})
        await conn.execute(
            "INSERT INTO outages (check_id, started_at, http_status_code)"
            " VALUES ($1, now() - interval '10 minutes', 503)", up_id)
    async with client.get(f"/webapi/monitors/{created['id']}") as r:
        body = await r.json()
    up, cert = body["checks"]["uptime"], body["checks"]["certificate_health"]
    assert up["status"] == "down"
    assert up["error"] == "HTTP 503"
    assert up["last_check_at"] == "2026-03-01 10:00:05"
    assert up["meta"]["http_status_code"] == 503
    assert TIMESTAMP.match(up["meta"]["offline_since"])
    assert cert["meta"] == {
        "issuer": "R3", "signature_algorithm": "sha256WithRSAEncryption",
        "is_self_signed": False, "valid_from": "2026-01-01 00:00:00",
        "valid_to": "2026-04-01 00:00:00",
    }


async def test_update_alias_and_url(client: aiohttp.ClientSession) -> None:
    created = await create(client, url="https://example.com/", alias="Old")
    async with client.put(
        f"/webapi/monitors/{created['id']}", json={"alias": "  New  ", "url": "https://example.com/x"}
    ) as r:
        assert r.status == 200
        body = await r.json()
    assert body["alias"] == "New"
    assert body["url"] == "https://example.com/x"
    assert set(body) == set(created)
    assert body["identifier"] == created["identifier"]
    assert set(body["checks"]["uptime"]) == {"id", "status", "interval", "is_enabled"}


async def test_update_with_nothing_to_change_answers_the_monitor(
    client: aiohttp.ClientSession,
) -> None:
    created = await create(client, url="https://example.com/")
    async with client.put(f"/webapi/monitors/{created['id']}", json={}) as r:
        assert r.status == 200
        assert await r.json() == created


async def test_delete_removes_the_monitor_checks_and_history(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    created = await create(client, url="https://example.com/")
    up_id = created["checks"]["uptime"]["id"]
    async with store.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO probe_results (check_id, at, kind, outcome, region)"
            " VALUES ($1, now(), 1, 0, 'local')", up_id)
        await conn.execute(
            "INSERT INTO check_rollups_hourly (check_id, hour, probes) VALUES ($1, now(), 1)",
            up_id)
    async with client.delete(f"/webapi/monitors/{created['id']}") as r:
        assert r.status == 204
        assert await r.read() == b""
    async with client.get(f"/webapi/monitors/{created['id']}") as r:
        assert r.status == 404
        assert await r.json() == {"message": "Monitor not found."}
    async with client.delete(f"/webapi/monitors/{created['id']}") as r:
        assert r.status == 404
    async with store.pool.acquire() as conn:
        for table in ("monitors", "checks", "probe_results", "check_rollups_hourly",
                      "check_periods"):
            assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 0, table


async def test_create_update_and_delete_notify_the_engine(
    client: aiohttp.ClientSession, db_dsn: str,
) -> None:
    listener = await asyncpg.connect(db_dsn)
    got: list[str] = []
    await listener.add_listener("upwatch_checks", lambda *a: got.append(a[3]))
    try:
        created = await create(client, url="https://example.com/")
        ids = {str(created["checks"][k]["id"])
               for k in ("uptime", "certificate_health", "domain_expiry")}
        async with client.put(f"/webapi/monitors/{created['id']}",
                              json={"url": "https://example.com/new"}) as r:
            assert r.status == 200
        async with client.delete(f"/webapi/monitors/{created['id']}") as r:
            assert r.status == 204
        # A round trip on the listener's connection delivers every pending notification.
        await listener.execute("SELECT 1")
    finally:
        await listener.close()
    assert sorted(got) == sorted(list(ids) * 3)
