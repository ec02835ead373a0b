"""The alert settings' API: maintenance windows (GET/POST /webapi/maintenance, DELETE
/webapi/maintenance/{id}), maintenance_seconds in statistics, and the check settings
recovery_threshold and expiry_threshold_percent; every answer true to the OpenAPI document,
and api.md's shapes untouched while none of it is used."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import aiohttp
import pytest

from engine.db.maintenance import MAX_WINDOWS
from engine.db.store import Store
from engine.domain.timefmt import fmt, utcnow
from engine.runtime.settings import Settings
from engine.web.api.maintenance import validate_window
from engine.web.app import create_app
from engine.web.keys import OPENAPI_DOCUMENT
from tests.support.openapi import check, resolve


@pytest.fixture
def doc(settings: Settings) -> dict[str, Any]:
    import orjson

    app = create_app(None, settings)  # type: ignore[arg-type]  # only the document is read
    return orjson.loads(app[OPENAPI_DOCUMENT])  # type: ignore[no-any-return]


def conforms(doc: dict[str, Any], path: str, method: str, status: int, body: Any) -> None:
    response = resolve(doc, doc["paths"][path][method]["responses"][str(status)])
    check(doc, response["content"]["application/json"]["schema"], body, f"{method} {path}")


async def create_monitor(client: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with client.post("/webapi/monitors", json={"url": url}) as r:
        assert r.status == 201, await r.text()
        return await r.json()  # type: ignore[no-any-return]


async def test_windows_are_created_listed_and_deleted(
    client: aiohttp.ClientSession, doc: dict[str, Any]
) -> None:
    m = await create_monitor(client, "https://example.com/")
    now = utcnow().replace(microsecond=0)
    one_off = {"monitors": [m["id"]], "reason": "database upgrade",
               "starts_at": fmt(now - timedelta(minutes=5)),
               "ends_at": fmt(now + timedelta(hours=1))}
    async with client.post("/webapi/maintenance", json=one_off) as r:
        assert r.status == 201, await r.text()
        a = await r.json()
    conforms(doc, "/webapi/maintenance", "post", 201, a)
    assert a["type"] == "one_off" and a["monitors"] == [m["id"]] and a["active"] is True
    assert a["starts_at"] == one_off["starts_at"] and a["ends_at"] == one_off["ends_at"]
    assert a["next_ends_at"] == one_off["ends_at"] and a["weekday"] is None
    weekly = {"reason": "patch day", "weekday": "Sunday", "start_time": "02:00",
              "duration_seconds": 7200, "time_zone": "Europe/Berlin"}
    async with client.post("/webapi/maintenance", json=weekly) as r:
        assert r.status == 201, await r.text()
        b = await r.json()
    conforms(doc, "/webapi/maintenance", "post", 201, b)
    assert b["type"] == "weekly" and b["monitors"] is None  # every monitor of the account
    assert b["weekday"] == "sunday" and b["start_time"] == "02:00:00"
    assert b["time_zone"] == "Europe/Berlin" and b["starts_at"] is None
    assert b["next_starts_at"] is not None
    async with client.get("/webapi/maintenance") as r:
        assert r.status == 200
        listed = await r.json()
    conforms(doc, "/webapi/maintenance", "get", 200, listed)
    assert [w["id"] for w in listed] == [a["id"], b["id"]]
    async with client.delete(f"/webapi/maintenance/{a['id']}") as r:
        assert r.status == 204
    async with client.delete(f"/webapi/maintenance/{a['id']}") as r:
        assert r.status == 404
    async with client.get("/webapi/maintenance") as r:
        assert [w["id"] for w in await r.json()] == [b["id"]]


@pytest.mark.parametrize(("body", "field"), [
    ({}, "starts_at"),
    ({"starts_at": "2026-05-01 10:00:00"}, "ends_at"),
    ({"starts_at": "2026-05-01 10:00:00", "ends_at": "2026-05-01 09:00:00"}, "ends_at"),
    ({"starts_at": "2026-05-01 10:00:00", "ends_at": "2026-07-01 09:00:00"}, "ends_at"),
    ({"starts_at": "2026-05-01T10:00:00Z", "ends_at": "2026-05-01 11:00:00"}, "starts_at"),
    ({"starts_at": "2026-02-30 10:00:00", "ends_at": "2026-05-01 11:00:00"}, "starts_at"),
    ({"weekday": "someday", "start_time": "02:00", "duration_seconds": 60,
      "time_zone": "UTC"}, "weekday"),
    ({"weekday": "monday", "start_time": "25:00", "duration_seconds": 60,
      "time_zone": "UTC"}, "start_time"),
    ({"weekday": "monday", "start_time": "02:00", "duration_seconds": 10,
      "time_zone": "UTC"}, "duration_seconds"),
    ({"weekday": "monday", "start_time": "02:00", "duration_seconds": 60,
      "time_zone": "Mars/Olympus"}, "time_zone"),
    ({"weekday": "monday", "start_time": "02:00", "duration_seconds": 60,
      "time_zone": "../../etc/passwd"}, "time_zone"),
    ({"weekday": "monday", "start_time": "02:00"}, "time_zone"),
    ({"weekday": "monday", "start_time": "02:00", "duration_seconds": 60, "time_zone": "UTC",
      "starts_at": "2026-05-01 10:00:00"}, "body"),
    ({"starts_at": "2026-05-01 10:00:00", "ends_at": "2026-05-01 11:00:00",
      "monitors": []}, "monitors"),
    ({"starts_at": "2026-05-01 10:00:00", "ends_at": "2026-05-01 11:00:00",
      "monitors": [987654]}, "monitors"),
    ({"starts_at": "2026-05-01 10:00:00", "ends_at": "2026-05-01 11:00:00",
      "reason": "a\nb"}, "reason"),
])
async def test_bad_windows_are_a_422_naming_the_field(
    client: aiohttp.ClientSession, body: dict[str, Any], field: str
) -> None:
    async with client.post("/webapi/maintenance", json=body) as r:
        assert r.status == 422, await r.text()
        assert field in (await r.json())["errors"]
    async with client.get("/webapi/maintenance") as r:
        assert await r.json() == []


async def test_another_accounts_monitors_and_windows_are_out_of_reach(
    client: aiohttp.ClientSession, store: Store, api: str
) -> None:
    other, token = await store.create_account("other")
    async with aiohttp.ClientSession(
        base_url=api, headers={"Authorization": f"Bearer {token}"}
    ) as theirs:
        m = await create_monitor(theirs, "https://example.org/")
        async with theirs.post("/webapi/maintenance", json={
            "starts_at": "2026-05-01 10:00:00", "ends_at": "2026-05-01 11:00:00",
        }) as r:
            w = await r.json()
    async with client.post("/webapi/maintenance", json={
        "starts_at": "2026-05-01 10:00:00", "ends_at": "2026-05-01 11:00:00",
        "monitors": [m["id"]],
    }) as r:
        assert r.status == 422
    async with client.delete(f"/webapi/maintenance/{w['id']}") as r:
        assert r.status == 404
    assert [x.id for x in await store.list_windows(other.id)] == [w["id"]]


async def test_statistics_leave_maintenance_out_of_uptime(
    client: aiohttp.ClientSession, store: Store, doc: dict[str, Any]
) -> None:
    m = await create_monitor(client, "https://example.com/")
    cid = m["checks"]["uptime"]["id"]
    now = utcnow()
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE check_periods SET started_at = $2 WHERE check_id = $1",
                           cid, now - timedelta(days=10))
        await conn.execute(
            "INSERT INTO check_rollups_hourly (check_id, hour, probes, responses,"
            " response_ms_sum) VALUES ($1, date_trunc('hour', now()), 100, 100, 5000)", cid)
        # A two-hour outage, one hour of it inside a window.
        await conn.execute(
            "INSERT INTO outages (check_id, started_at, ended_at, http_status_code)"
            " VALUES ($1, $2, $3, 500)", cid, now - timedelta(hours=5),
            now - timedelta(hours=3))
    async with client.get(f"/webapi/monitors/{m['id']}/statistics") as r:
        plain = await r.json()
    assert "maintenance_seconds" not in plain  # api.md's shape while no window is there
    async with client.get(f"/webapi/monitors/{m['id']}") as r:
        before = (await r.json())["checks"]["uptime"]["meta"]["average_uptime_percentage"]
    assert before == plain["uptime_percentage_30d"]
    assert plain["uptime_percentage_30d"] == pytest.approx(
        100 * (1 - 7200 / (10 * 86400)), abs=0.001)
    async with client.post("/webapi/maintenance", json={
        "monitors": [m["id"]], "reason": "move",
        "starts_at": fmt(now - timedelta(hours=4)), "ends_at": fmt(now - timedelta(hours=2)),
    }) as r:
        assert r.status == 201
        window = await r.json()
    # Entered after the fact, a window excuses nothing: it counts from its creation on.
    async with client.get(f"/webapi/monitors/{m['id']}/statistics") as r:
        assert await r.json() == plain
    # The same window, declared a day ahead.
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE maintenance_windows SET created_at = $2 WHERE id = $1",
                           window["id"], now - timedelta(days=1))
    await asyncio.sleep(1.1)  # the API's per-account copy of the windows is a second old
    async with client.get(f"/webapi/monitors/{m['id']}/statistics") as r:
        stats = await r.json()
    conforms(doc, "/webapi/monitors/{id}/statistics", "get", 200, stats)
    assert stats["maintenance_seconds"] == 7200
    assert stats["uptime_percentage_30d"] == pytest.approx(
        100 * (1 - 3600 / (10 * 86400 - 7200)), abs=0.001)
    assert stats["outages"] == plain["outages"]  # outages stay listed as they were
    # The monitor's meta shows the same 30-day uptime, in get and in list.
    async with client.get(f"/webapi/monitors/{m['id']}") as r:
        meta = (await r.json())["checks"]["uptime"]["meta"]
    assert meta["average_uptime_percentage"] == stats["uptime_percentage_30d"]
    async with client.get("/webapi/monitors") as r:
        [listed] = await r.json()
    assert listed["checks"]["uptime"]["meta"] == meta


async def test_recovery_and_percent_thresholds_are_set_per_check_kind(
    client: aiohttp.ClientSession, doc: dict[str, Any]
) -> None:
    m = await create_monitor(client, "https://example.com/")
    up, cert = m["checks"]["uptime"]["id"], m["checks"]["certificate_health"]["id"]
    async with client.put(f"/webapi/checks/{up}", json={"interval": 60}) as r:
        plain = await r.json()
    assert set(plain) == {"id", "status", "interval", "is_enabled", "notification_threshold",
                          "last_check_at"}  # api.md's shape while the settings are 0
    async with client.put(f"/webapi/checks/{up}", json={"recovery_threshold": 120}) as r:
        assert r.status == 200
        body = await r.json()
    conforms(doc, "/webapi/checks/{id}", "put", 200, body)
    assert body["recovery_threshold"] == 120 and body["interval"] == 60
    async with client.put(f"/webapi/checks/{cert}", json={"expiry_threshold_percent": 33}) as r:
        assert r.status == 200
        assert (await r.json())["expiry_threshold_percent"] == 33
    async with client.get(f"/webapi/monitors/{m['id']}") as r:
        full = await r.json()
    conforms(doc, "/webapi/monitors/{id}", "get", 200, full)
    assert full["checks"]["uptime"]["recovery_threshold"] == 120
    assert full["checks"]["certificate_health"]["expiry_threshold_percent"] == 33
    assert "recovery_threshold" not in full["checks"]["certificate_health"]
    for check_id, body, field in [
        (cert, {"recovery_threshold": 60}, "recovery_threshold"),
        (up, {"expiry_threshold_percent": 33}, "expiry_threshold_percent"),
        (up, {"recovery_threshold": -1}, "recovery_threshold"),
        (up, {"recovery_threshold": 86401}, "recovery_threshold"),
        (up, {"recovery_threshold": "60"}, "recovery_threshold"),
        (cert, {"expiry_threshold_percent": 100}, "expiry_threshold_percent"),
    ]:
        async with client.put(f"/webapi/checks/{check_id}", json=body) as r:
            assert r.status == 422, (body, await r.text())
            assert field in (await r.json())["errors"]
    async with client.put(f"/webapi/checks/{up}", json={"recovery_threshold": 0}) as r:
        assert "recovery_threshold" not in await r.json()


async def test_an_account_has_at_most_200_windows(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    body = {"starts_at": "2026-05-01 10:00:00", "ends_at": "2026-05-01 11:00:00"}
    for _ in range(MAX_WINDOWS):
        await store.create_window(acc.id, validate_window(body))
    async with client.post("/webapi/maintenance", json=body) as r:
        assert r.status == 422
        assert "maintenance_limit" in (await r.json())["errors"]
    assert len(await store.list_windows(acc.id)) == MAX_WINDOWS
