"""Heartbeat monitors through /webapi: create with a period or a cron schedule, the shapes
of create, get and list, updates, 422s naming the field, and the monitor's ping_url."""

from __future__ import annotations

import uuid
from typing import Any

import aiohttp

from engine.db.store import Store
from engine.monitors.checkset import checks_of
from engine.runtime.settings import Settings


async def create(client: aiohttp.ClientSession, **body: Any) -> dict[str, Any]:
    async with client.post("/webapi/monitors", json={"type": "heartbeat", **body}) as r:
        assert r.status == 201, await r.text()
        data: dict[str, Any] = await r.json()
        return data


async def errors_of(client: aiohttp.ClientSession, method: str, path: str,
                    body: dict[str, Any]) -> dict[str, Any]:
    async with client.request(method, path, json=body) as r:
        assert r.status == 422, await r.text()
        data: dict[str, Any] = await r.json()
        return data["errors"]


def test_a_heartbeat_monitor_has_its_heartbeat_check_alone() -> None:
    assert checks_of("", "", "heartbeat") == ("heartbeat",)
    assert checks_of("heartbeat", "") == ("heartbeat",)  # as a heartbeat's row is stored
    assert checks_of("https", "example.com") == ("uptime", "certificate_health")


async def test_create_with_a_period_answers_the_monitor_with_its_ping_url(
    client: aiohttp.ClientSession, settings: Settings,
) -> None:
    m = await create(client, alias="nightly backup", period=86400, grace=3600)
    assert m["type"] == "heartbeat"
    assert m["alias"] == "nightly backup"
    assert (m["period"], m["grace"], m["max_runtime"]) == (86400, 3600, 3600)
    assert set(m["checks"]) == {"heartbeat"}
    check = m["checks"]["heartbeat"]
    assert check["status"] == "pending" and check["is_enabled"] is True
    prefix = f"{settings.public_base_url}/ping/"
    assert m["ping_url"].startswith(prefix)
    assert uuid.UUID(m["ping_url"][len(prefix):]).version == 4
    assert "url" not in m


async def test_create_with_a_schedule_and_the_full_shape_on_get_and_list(
    client: aiohttp.ClientSession,
) -> None:
    m = await create(client, alias="reports", schedule="0 3 * * *",
                     time_zone="Europe/Berlin", grace=600, min_runtime=60)
    async with client.get(f"/webapi/monitors/{m['id']}") as r:
        got = await r.json()
    assert got["schedule"] == "0 3 * * *" and got["time_zone"] == "Europe/Berlin"
    assert got["min_runtime"] == 60 and "period" not in got
    check = got["checks"]["heartbeat"]
    assert check["meta"] == {
        "last_ping_at": None, "next_expected_at": None, "last_start_at": None,
        "last_duration_seconds": None, "last_exit_status": None, "last_body": None,
    }
    async with client.get("/webapi/monitors") as r:
        listed = await r.json()
    assert [x["id"] for x in listed] == [m["id"]]
    assert listed[0] == got


async def test_url_monitors_keep_their_shape_beside_heartbeats(
    client: aiohttp.ClientSession,
) -> None:
    await create(client, alias="job", period=3600, grace=300)
    async with client.post("/webapi/monitors", json={"url": "https://example.com"}) as r:
        assert r.status == 201
        url_monitor = await r.json()
    assert "type" not in url_monitor
    assert set(url_monitor["checks"]) == {"uptime", "certificate_health"}


async def test_bad_bodies_are_422_naming_the_field(client: aiohttp.ClientSession) -> None:
    path = "/webapi/monitors"
    assert "schedule" in await errors_of(client, "POST", path, {
        "type": "heartbeat", "alias": "x", "schedule": "61 3 * * *", "grace": 600})
    assert "schedule" in await errors_of(client, "POST", path, {
        "type": "heartbeat", "alias": "x", "schedule": "0 3 * *", "grace": 600})
    errs = await errors_of(client, "POST", path, {
        "type": "heartbeat", "alias": "x", "schedule": "0 3 * * *", "time_zone": "Mars/Base",
        "grace": 600})
    assert errs["time_zone"] == ["The time_zone is an unknown time zone: Mars/Base."]
    assert "period" in await errors_of(client, "POST", path, {"type": "heartbeat",
                                                               "alias": "x"})
    assert "grace" in await errors_of(client, "POST", path, {
        "type": "heartbeat", "alias": "x", "period": 3600, "grace": "soon"})
    assert "url" in await errors_of(client, "POST", path, {
        "type": "heartbeat", "alias": "x", "period": 3600, "url": "https://example.com"})
    assert "type" in await errors_of(client, "POST", path, {"type": "carrier-pigeon"})
    assert "alias" in await errors_of(client, "POST", path, {"type": "heartbeat",
                                                              "period": 3600})


async def test_updates_of_the_monitor_and_its_check(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await create(client, alias="job", period=3600, grace=300)
    cid = m["checks"]["heartbeat"]["id"]
    async with client.put(f"/webapi/monitors/{m['id']}",
                          json={"alias": "renamed", "schedule": "*/5 * * * *"}) as r:
        assert r.status == 200, await r.text()
        updated = await r.json()
    assert updated["alias"] == "renamed" and updated["schedule"] == "*/5 * * * *"
    assert "period" not in updated
    async with client.put(f"/webapi/checks/{cid}",
                          json={"period": 7200, "max_runtime": 900,
                                "recovery_threshold": 60}) as r:
        assert r.status == 200, await r.text()
        check = await r.json()
    assert check["period"] == 7200 and check["max_runtime"] == 900
    assert check["recovery_threshold"] == 60
    assert "interval" in await errors_of(client, "PUT", f"/webapi/checks/{cid}",
                                         {"interval": 60})
    assert "time_zone" in await errors_of(client, "PUT", f"/webapi/checks/{cid}",
                                          {"time_zone": "Nowhere/Land"})
    # Disable and enable as for any check; delete takes the heartbeat with it.
    async with client.post(f"/webapi/checks/{cid}/disable") as r:
        assert (await r.json())["status"] == "paused"
    async with client.post(f"/webapi/checks/{cid}/enable") as r:
        assert (await r.json())["status"] == "pending"
    async with client.delete(f"/webapi/monitors/{m['id']}") as r:
        assert r.status == 204
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM heartbeats") == 0
