"""A monitor has exactly the checks ``checkset.checks_of`` gives it: one whose scheme has no
certificate check (the test-only ``echo``) or one stored without an uptime check lists,
gets, exports, applies (unchanged: no writes), changes URL, deletes and shows on its status
page with just its own checks, and PingPing clients never see a monitor that is not http(s)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from tests.support.schemes import echo_registered

ECHO = "echo://127.0.0.1:7"


@pytest.fixture
def echo(monkeypatch: pytest.MonkeyPatch) -> Any:
    with echo_registered(monkeypatch) as scheme:
        yield scheme


async def call(client: aiohttp.ClientSession, method: str, path: str, **kw: Any
               ) -> tuple[int, Any]:
    async with client.request(method, path, **kw) as r:
        return r.status, (await r.json() if r.content_type == "application/json" else None)


async def kinds_stored(store: Store, monitor_id: int) -> list[str]:
    async with store.pool.acquire() as conn:
        return [r["kind"] for r in await conn.fetch(
            "SELECT kind FROM checks WHERE monitor_id = $1 ORDER BY id", monitor_id)]


async def test_a_monitor_without_a_certificate_check_end_to_end(
    echo: Any, client: aiohttp.ClientSession, store: Store, api: str,
) -> None:
    status, made = await call(client, "POST", "/webapi/monitors", json={"url": ECHO})
    assert status == 201, made
    assert list(made["checks"]) == ["uptime"] and made["scheme"] == "echo"
    assert made["url"] == ECHO and made["host"] == "127.0.0.1"
    status, web = await call(client, "POST", "/webapi/monitors",
                             json={"url": "https://example.com/"})
    assert status == 201
    assert await kinds_stored(store, made["id"]) == ["uptime"]

    status, listed = await call(client, "GET", "/webapi/monitors")
    assert status == 200
    assert [list(m["checks"]) for m in listed] == [
        ["uptime"], ["uptime", "certificate_health", "domain_expiry"]]
    assert listed[0]["checks"]["uptime"]["meta"]["average_uptime_percentage"] == 100
    status, got = await call(client, "GET", f"/webapi/monitors/{made['id']}")
    assert status == 200 and got == listed[0]
    status, stats = await call(client, "GET", f"/webapi/monitors/{made['id']}/statistics")
    assert status == 200 and stats["checks_run_30d"] == 0

    # A request is no part of an echo monitor: the scheme's rules answer, on create and on
    # an update that keeps the URL.
    status, body = await call(client, "POST", "/webapi/monitors",
                              json={"url": ECHO, "request": {"method": "POST"}})
    assert status == 422 and body["errors"] == {"request": ["An echo monitor sends no request."]}
    status, body = await call(client, "PUT", f"/webapi/monitors/{made['id']}",
                              json={"request": {"method": "POST"}})
    assert status == 422 and body["errors"] == {"request": ["An echo monitor sends no request."]}

    # Export holds its one check table; applying the export changes nothing.
    status, doc = await call(client, "GET", "/webapi/monitors/export",
                             params={"format": "json"})
    assert status == 200
    assert [sorted(e) for e in doc["monitors"]] == [
        ["alias", "uptime", "url"],
        ["alias", "certificate_health", "domain_expiry", "uptime", "url"]]
    async with store.pool.acquire() as conn:
        before = await conn.fetch("SELECT id, updated_at, config_version FROM checks ORDER BY id")
    status, applied = await call(client, "PUT", "/webapi/monitors", json=doc,
                                 params={"prune": "true"})
    assert status == 200, applied
    assert (applied["created"], applied["updated"], applied["deleted"], applied["unchanged"]) \
        == ([], [], [], 2)
    async with store.pool.acquire() as conn:
        after = await conn.fetch("SELECT id, updated_at, config_version FROM checks ORDER BY id")
    assert after == before
    # A certificate table on an echo monitor is refused, naming it.
    doc["monitors"][0]["certificate_health"] = {"interval": 3600}
    status, refused = await call(client, "PUT", "/webapi/monitors", json=doc)
    assert status == 422
    assert refused["errors"] == {
        "monitors[0].certificate_health": ["A echo:// monitor has no certificate_health check."]}

    # Its status page and badges show the one check.
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(f"{api}/{made['identifier']}.json") as r:
            assert r.status == 200
            page = await r.json()
        async with anonymous.get(f"{api}/{made['identifier']}") as r:
            assert r.status == 200 and "Certificate" not in await r.text()
        async with anonymous.get(f"{api}/{made['identifier']}/badge.svg") as r:
            assert r.status == 200
    assert list(page["checks"]) == ["uptime"]
    assert page["certificate"] == {"issuer": None, "valid_to": None}

    status, _ = await call(client, "DELETE", f"/webapi/monitors/{made['id']}")
    assert status == 204
    assert await kinds_stored(store, made["id"]) == []
    status, listed = await call(client, "GET", "/webapi/monitors")
    assert [m["id"] for m in listed] == [web["id"]]


async def test_a_new_scheme_brings_its_checks_and_drops_the_others(
    echo: Any, client: aiohttp.ClientSession, store: Store,
) -> None:
    status, made = await call(client, "POST", "/webapi/monitors",
                              json={"url": "https://example.com/"})
    assert status == 201
    cert_id = made["checks"]["certificate_health"]["id"]
    status, moved = await call(client, "PUT", f"/webapi/monitors/{made['id']}",
                               json={"url": ECHO})
    assert status == 200, moved
    assert list(moved["checks"]) == ["uptime"]
    assert await kinds_stored(store, made["id"]) == ["uptime"]
    status, _ = await call(client, "GET", f"/webapi/checks/{cert_id}/certificates")
    assert status == 404
    status, back = await call(client, "PUT", f"/webapi/monitors/{made['id']}",
                              json={"url": "https://example.com/"})
    assert status == 200
    assert list(back["checks"]) == ["uptime", "certificate_health", "domain_expiry"]
    assert back["checks"]["certificate_health"]["status"] == "pending"
    assert back["checks"]["certificate_health"]["interval"] == 3600

    # The same through a monitor set: a file moving it to echo drops the check.
    doc: dict[str, Any] = {"monitors": [{"key": "m", "url": "https://example.com/"}]}
    status, applied = await call(client, "PUT", "/webapi/monitors", json=doc)
    assert status == 200 and [u["id"] for u in applied["updated"]] == [made["id"]]
    doc = {"monitors": [{"key": "m", "url": ECHO}]}
    status, applied = await call(client, "PUT", "/webapi/monitors", json=doc)
    assert status == 200, applied
    assert [u["changes"] for u in applied["updated"]] == [
        ["url", "alias", "certificate_health", "domain_expiry"]]
    assert await kinds_stored(store, made["id"]) == ["uptime"]
    doc = {"monitors": [{"key": "m", "url": "http://example.com/"}]}
    status, applied = await call(client, "PUT", "/webapi/monitors", json=doc)
    assert status == 200, applied
    status, got = await call(client, "GET", f"/webapi/monitors/{made['id']}")
    assert list(got["checks"]) == ["uptime", "certificate_health", "domain_expiry"]
    assert got["checks"]["certificate_health"]["status"] == "paused"  # http: as on create


async def test_a_monitor_without_an_uptime_check_has_null_figures(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str], api: str,
) -> None:
    acc, _ = account
    monitor = await store.create_monitor(
        acc.id, url="https://example.com/", scheme="https", host="example.com", port="",
        alias="Cert only", interval=30, notification_threshold=0, certificate_interval=3600,
        monitor_limit=10, kinds=["certificate_health"])
    assert list(monitor.checks) == ["certificate_health"]
    status, listed = await call(client, "GET", "/webapi/monitors")
    assert status == 200 and [list(m["checks"]) for m in listed] == [["certificate_health"]]
    status, stats = await call(client, "GET", f"/webapi/monitors/{monitor.id}/statistics")
    assert status == 200
    assert stats == {"uptime_percentage_30d": None, "average_response_time_ms": None,
                     "checks_run_30d": None, "outages": []}
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(f"{api}/{monitor.identifier}.json") as r:
            assert r.status == 200
            assert list((await r.json())["checks"]) == ["certificate_health"]
    status, _ = await call(client, "DELETE", f"/webapi/monitors/{monitor.id}")
    assert status == 204


async def test_pingping_clients_see_only_http_monitors(
    echo: Any, client: aiohttp.ClientSession,
) -> None:
    status, made = await call(client, "POST", "/webapi/monitors", json={"url": ECHO})
    assert status == 201
    status, web = await call(client, "POST", "/webapi/monitors",
                             json={"url": "https://example.com/"})
    status, listed = await call(client, "GET", "/pingping/webapi/monitors")
    assert status == 200 and [m["id"] for m in listed["data"]] == [web["id"]]
    uptime_id = made["checks"]["uptime"]["id"]
    for method, path in (("GET", f"/monitors/{made['id']}"),
                         ("GET", f"/monitors/{made['id']}/statistics"),
                         ("DELETE", f"/monitors/{made['id']}"),
                         ("POST", f"/checks/{uptime_id}/disable")):
        status, body = await call(client, method, "/pingping/webapi" + path)
        assert status == 404, (method, path, body)
    status, body = await call(client, "POST", "/pingping/webapi/monitors", json={"url": ECHO})
    assert status == 422
    assert body["errors"] == {
        "url": ["The url must be an absolute URL with scheme http or https."]}
    status, _ = await call(client, "GET", f"/webapi/monitors/{made['id']}")
    assert status == 200  # still there: the mount only hides it


