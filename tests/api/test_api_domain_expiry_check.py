"""The domain_expiry check through the API: its JSON (meta keys and thresholds), PUT of its
thresholds and interval, other kinds' settings refused naming the field, enable and
disable."""

from __future__ import annotations

from typing import Any

import aiohttp

from engine.db.store import Store

META_KEYS = {"domain", "registrar", "expires_at", "days_left", "statuses", "nameservers",
             "source", "rdap_server", "checked_at", "warning"}


async def monitor_with_domain_check(
        client: aiohttp.ClientSession, store: Store, url: str = "https://www.example.com/"
) -> tuple[int, int]:
    async with client.post("/webapi/monitors", json={"url": url}) as r:
        assert r.status == 201, await r.text()
        created = await r.json()
    check = created["checks"]["domain_expiry"]
    assert check == {"id": check["id"], "status": "pending", "interval": 14400,
                     "is_enabled": True}
    return created["id"], check["id"]


async def send(client: aiohttp.ClientSession, method: str, path: str, body: Any = None
               ) -> tuple[int, Any]:
    async with client.request(method, path, json=body) as r:
        return r.status, await r.json()


async def test_the_check_json_before_and_after_a_probe(
        client: aiohttp.ClientSession, store: Store) -> None:
    monitor_id, check_id = await monitor_with_domain_check(client, store)
    status, m = await send(client, "GET", f"/webapi/monitors/{monitor_id}")
    assert status == 200
    check = m["checks"]["domain_expiry"]
    assert check["id"] == check_id and check["status"] == "pending"
    assert check["is_enabled"] is True and check["interval"] == 14400
    assert check["expiry_threshold_days"] == [30, 14, 7, 1]
    assert set(check["meta"]) == META_KEYS
    assert check["meta"]["statuses"] == [] and check["meta"]["expires_at"] is None
    async with store.pool.acquire() as conn:
        await conn.execute(
            "UPDATE checks SET status = 'ok', meta = $2::jsonb, last_check_at = now()"
            " WHERE id = $1", check_id,
            {"domain": "example.com", "registrar": "R", "expires_at": "2027-01-01 00:00:00",
             "days_left": 34, "statuses": ["ok"], "nameservers": ["ns1.example.net"],
             "source": "rdap", "rdap_server": "https://rdap.test/",
             "checked_at": "2026-11-28 00:00:00", "warning": None})
    _, listed = await send(client, "GET", "/webapi/monitors")
    [mine] = [x for x in listed if x["id"] == monitor_id]
    meta = mine["checks"]["domain_expiry"]["meta"]
    assert meta["days_left"] == 34 and meta["expires_at"] == "2027-01-01 00:00:00"
    assert meta["registrar"] == "R" and meta["nameservers"] == ["ns1.example.net"]


async def test_put_thresholds_and_interval(client: aiohttp.ClientSession, store: Store) -> None:
    _, check_id = await monitor_with_domain_check(client, store)
    status, body = await send(client, "PUT", f"/webapi/checks/{check_id}",
                              {"expiry_threshold_days": [7, 60, 7, 21], "interval": 28800})
    assert status == 200, body
    assert body["expiry_threshold_days"] == [60, 21, 7] and body["interval"] == 28800
    async with store.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT expiry_threshold_days, interval_s, config_version"
                                  " FROM checks WHERE id = $1", check_id)
    assert row["expiry_threshold_days"] == [60, 21, 7] and row["interval_s"] == 28800
    assert row["config_version"] == 2
    # [] turns renewal-due events off.
    status, body = await send(client, "PUT", f"/webapi/checks/{check_id}",
                              {"expiry_threshold_days": []})
    assert status == 200 and body["expiry_threshold_days"] == []


async def test_bad_thresholds_and_other_kinds_settings_are_422_naming_the_field(
        client: aiohttp.ClientSession, store: Store) -> None:
    _, check_id = await monitor_with_domain_check(client, store)
    path = f"/webapi/checks/{check_id}"
    for bad, words in (
        (30, "must be a list of days"),
        ([0, 7], "between 1 and 365"),
        ([400], "between 1 and 365"),
        (["7"], "must be an integer"),
        ([True], "must be an integer"),
        (list(range(1, 10)), "at most 8 values"),
    ):
        status, body = await send(client, "PUT", path, {"expiry_threshold_days": bad})
        assert status == 422, bad
        assert words in body["errors"]["expiry_threshold_days"][0], (bad, body)
    status, body = await send(client, "PUT", path,
                              {"notification_threshold": 60, "interval": 31})
    assert status == 422
    assert set(body["errors"]) == {"notification_threshold", "interval"}
    assert "expiry_threshold_days" in body["errors"]["notification_threshold"][0]
    for field in ("recovery_threshold", "expiry_threshold_percent"):
        status, body = await send(client, "PUT", path, {field: 10})
        assert status == 422 and set(body["errors"]) == {field}
    async with store.pool.acquire() as conn:
        assert await conn.fetchval(
            "SELECT config_version FROM checks WHERE id = $1", check_id) == 1


async def test_disable_and_enable(client: aiohttp.ClientSession, store: Store) -> None:
    _, check_id = await monitor_with_domain_check(client, store)
    assert await send(client, "POST", f"/webapi/checks/{check_id}/disable") == (
        200, {"id": check_id, "is_enabled": False, "status": "paused"})
    assert await send(client, "POST", f"/webapi/checks/{check_id}/enable") == (
        200, {"id": check_id, "is_enabled": True, "status": "pending"})


async def test_ip_literals_have_none_and_a_url_change_adds_or_removes_it(
        client: aiohttp.ClientSession, store: Store) -> None:
    status, created = await send(client, "POST", "/webapi/monitors",
                                 {"url": "https://203.0.113.9/"})
    assert status == 201 and set(created["checks"]) == {"uptime", "certificate_health"}
    monitor_id = created["id"]
    status, updated = await send(client, "PUT", f"/webapi/monitors/{monitor_id}",
                                 {"url": "https://shop.example.co.uk/"})
    assert status == 200 and "domain_expiry" in updated["checks"]
    _, got = await send(client, "GET", f"/webapi/monitors/{monitor_id}")
    assert got["checks"]["domain_expiry"]["status"] == "pending"
    status, updated = await send(client, "PUT", f"/webapi/monitors/{monitor_id}",
                                 {"url": "http://[2001:db8::5]:8080/"})
    assert status == 200 and "domain_expiry" not in updated["checks"]
    async with store.pool.acquire() as conn:
        assert await conn.fetchval(
            "SELECT count(*) FROM checks WHERE monitor_id = $1 AND kind = 'domain_expiry'",
            monitor_id) == 0
