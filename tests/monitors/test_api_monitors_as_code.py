"""Monitors as code over HTTP: ``PUT /webapi/monitors`` makes the account match a monitor set
in one transaction, ``GET /webapi/monitors/export`` gives the set back."""

from __future__ import annotations

import asyncio
import tomllib
from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.db.store import Store
from engine.runtime.settings import Settings


def entry(url: str, **extra: Any) -> dict[str, Any]:
    return {"url": url, **extra}


async def put(client: aiohttp.ClientSession, doc: Any, **params: str) -> tuple[int, Any]:
    async with client.put("/webapi/monitors", json=doc, params=params) as r:
        return r.status, await r.json()


async def rows(store: Store, account_id: int) -> list[asyncpg.Record]:
    async with store.pool.acquire() as conn:
        return await conn.fetch(
            "SELECT m.id, m.key, m.url, m.alias, m.updated_at, u.interval_s, u.is_enabled,"
            " u.notification_threshold_s, u.config_version, u.updated_at AS u_updated,"
            " c.interval_s AS c_interval, c.notification_threshold_s AS c_threshold,"
            " c.is_enabled AS c_enabled, c.status AS c_status, c.updated_at AS c_updated"
            " FROM monitors m"
            " JOIN checks u ON u.monitor_id = m.id AND u.kind = 'uptime'"
            " JOIN checks c ON c.monitor_id = m.id AND c.kind = 'certificate_health'"
            " WHERE m.account_id = $1 ORDER BY m.id", account_id)


SET = {"monitors": [
    entry("https://shop.example.com/", key="shop", alias="Shop",
          uptime={"interval": 60, "notification_threshold": 300},
          certificate_health={"expiry_threshold_days": 14, "enabled": False}),
    entry("https://blog.example.com/"),
]}


async def test_apply_creates_then_an_unchanged_set_writes_nothing(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str], db_dsn: str,
) -> None:
    status, body = await put(client, SET)
    assert status == 200, body
    assert [(c["index"], c["key"], c["url"]) for c in body["created"]] == [
        (0, "shop", "https://shop.example.com/"), (1, None, "https://blog.example.com/")]
    assert body["updated"] == [] and body["deleted"] == [] and body["unchanged"] == 0
    got = await rows(store, account[0].id)
    assert [(r["key"], r["alias"], r["interval_s"], r["notification_threshold_s"],
             r["c_interval"], r["c_threshold"], r["c_enabled"], r["c_status"]) for r in got] == [
        ("shop", "Shop", 60, 300, 3600, 14 * 86400, False, "paused"),
        (None, "blog.example.com", 30, 0, 3600, 0, True, "pending")]
    assert {c["id"] for c in body["created"]} == {r["id"] for r in got}

    # The same set again: nothing moves, and the engine hears nothing.
    heard: list[str] = []
    listener = await asyncpg.connect(db_dsn)
    await listener.add_listener("upwatch_checks", lambda *a: heard.append(a[3]))
    try:
        status, body = await put(client, SET, prune="true")
        assert status == 200
        assert (body["created"], body["updated"], body["deleted"], body["unchanged"]) == (
            [], [], [], 2)
        # A NOTIFY sent by a commit reaches a listener before a later one: this one proves
        # the listener is live, so the silence before it means something.
        await listener.execute("SELECT pg_notify('upwatch_checks', 'probe')")
        async with asyncio.timeout(5):
            while "probe" not in heard:
                await asyncio.sleep(0.01)
    finally:
        await listener.close()
    assert heard == ["probe"]
    assert await rows(store, account[0].id) == got


async def test_apply_updates_what_differs_and_prunes_only_when_asked(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str],
) -> None:
    await put(client, SET)
    before = await rows(store, account[0].id)
    changed = {"monitors": [
        # Same key, new path on the same host: history kept, config version bumped.
        entry("https://shop.example.com/cart", key="shop", alias="Shop",
              uptime={"interval": 60, "notification_threshold": 300},
              certificate_health={"expiry_threshold_days": 14, "enabled": True}),
        entry("https://new.example.com/"),
    ]}
    status, body = await put(client, changed, dry_run="true")
    assert status == 200 and body["dry_run"] is True
    assert [(u["key"], u["changes"]) for u in body["updated"]] == [
        ("shop", ["url", "certificate_health.enabled"])]
    assert [c["url"] for c in body["created"]] == ["https://new.example.com/"]
    assert body["created"][0]["id"] is None and body["kept"] == 1
    assert await rows(store, account[0].id) == before  # a dry run writes nothing

    status, body = await put(client, changed)
    assert status == 200
    assert body["deleted"] == [] and body["kept"] == 1
    after = await rows(store, account[0].id)
    shop = next(r for r in after if r["key"] == "shop")
    assert shop["url"] == "https://shop.example.com/cart"
    assert (shop["c_enabled"], shop["c_status"]) == (True, "pending")
    assert shop["config_version"] == before[0]["config_version"] + 1
    blog = next(r for r in after if r["url"] == "https://blog.example.com/")
    assert blog == before[1]  # not in the file, kept untouched without prune

    status, body = await put(client, changed, prune="true")
    assert [d["url"] for d in body["deleted"]] == ["https://blog.example.com/"]
    assert {r["url"] for r in await rows(store, account[0].id)} == {
        "https://shop.example.com/cart", "https://new.example.com/"}


async def test_an_http_monitors_certificate_check_starts_paused_and_applies_keep_it(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str],
) -> None:
    plain = {"monitors": [entry("http://plain.example.com/", key="plain")]}
    status, body = await put(client, plain)
    assert status == 200 and len(body["created"]) == 1
    [row] = await rows(store, account[0].id)
    assert (row["is_enabled"], row["c_enabled"], row["c_status"]) == (True, False, "paused")
    # The same file again moves nothing.
    status, body = await put(client, plain)
    assert (body["updated"], body["unchanged"]) == ([], 1)
    # Enabled by hand, it stays enabled through an apply of a file silent on it, and
    # through the file moving the URL to https and back.
    async with client.get("/webapi/monitors") as r:
        [m] = await r.json()
    async with client.post(
            f"/webapi/checks/{m['checks']['certificate_health']['id']}/enable") as r:
        assert r.status == 200
    for url in ("http://plain.example.com/", "https://plain.example.com/",
                "http://plain.example.com/"):
        status, body = await put(client, {"monitors": [entry(url, key="plain")]})
        assert status == 200
        assert all("certificate_health.enabled" not in u["changes"] for u in body["updated"])
        [row] = await rows(store, account[0].id)
        assert (row["url"], row["c_enabled"], row["c_status"]) == (url, True, "pending")


async def test_a_new_host_by_key_resets_history_as_the_api_does(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str],
) -> None:
    await put(client, SET)
    shop_id = (await rows(store, account[0].id))[0]["id"]
    async with store.pool.acquire() as conn:
        check_id = await conn.fetchval(
            "SELECT id FROM checks WHERE monitor_id = $1 AND kind = 'uptime'", shop_id)
        await conn.execute(
            "INSERT INTO outages (check_id, started_at, ended_at) VALUES"
            " ($1, now() - interval '2 hours', now() - interval '1 hour')", check_id)
        await conn.execute("UPDATE checks SET status = 'ok' WHERE id = $1", check_id)
    moved = {"monitors": [dict(SET["monitors"][0], url="https://shop.example.net/"),
                          SET["monitors"][1]]}
    status, body = await put(client, moved)
    assert status == 200 and body["updated"][0]["changes"] == ["url"]
    async with store.pool.acquire() as conn:
        assert await conn.fetchval(
            "SELECT count(*) FROM outages WHERE check_id = $1", check_id) == 0
        assert await conn.fetchval("SELECT status FROM checks WHERE id = $1", check_id) == \
            "pending"
        assert await conn.fetchval(
            "SELECT host FROM monitors WHERE id = $1", shop_id) == "shop.example.net"


async def test_every_bad_entry_is_listed_by_index_and_nothing_is_applied(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str],
) -> None:
    bad = {"monitors": [
        entry("https://ok.example/"),
        entry("https://ok.example/"),                      # the same URL twice
        entry("https://x.example/", colour="red"),         # an unknown key
        entry("https://y.example/", uptime={"interval": 45}),  # no plan allows 45 s
        entry("ftp://z.example/"),
        entry("https://k.example/", key="a b"),
        {"alias": "no url"},
    ]}
    status, body = await put(client, bad)
    assert status == 422
    errors = body["errors"]
    assert set(errors) == {
        "monitors[1].url", "monitors[2].colour", "monitors[3].uptime.interval",
        "monitors[4].url", "monitors[5].key", "monitors[6].url"}
    assert "already named by monitors[0]" in errors["monitors[1].url"][0]
    assert "Unknown key 'colour'" in errors["monitors[2].colour"][0]
    assert errors["monitors[3].uptime.interval"][0].startswith("The interval must be one of")
    assert errors["monitors[6].url"] == ["The url field is required."]
    assert await rows(store, account[0].id) == []


async def test_the_monitor_limit_refuses_the_whole_set(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str],
    settings: Settings,
) -> None:
    limit = settings.plan("default").monitor_limit
    status, body = await put(client, {"monitors": [
        entry(f"https://h{i}.example/") for i in range(limit + 1)]})
    assert status == 422 and list(body["errors"]) == ["monitor_limit"]
    assert await rows(store, account[0].id) == []


@pytest.fixture
def settings(tmp_path: Any) -> Settings:
    from engine.runtime.settings import Plan

    return Settings(
        data_dir=tmp_path / "data", allow_private_targets=True, port=0,
        base_url="http://127.0.0.1:8080", rate_limit_per_second=0,
        plans={"default": Plan(monitor_limit=1500)},
    )


async def test_export_round_trips_to_an_empty_account(
    client: aiohttp.ClientSession, store: Store, api: str,
) -> None:
    # Monitors made through the API as a user would, one URL twice.
    for url in ("https://a.example/", "https://b.example:8443/x?y=1", "https://a.example/"):
        async with client.post("/webapi/monitors", json={"url": url, "interval": 300}) as r:
            assert r.status == 201
    await put(client, {"monitors": [entry("https://c.example/", key="c", alias="Sea",
                                          certificate_health={"interval": 86400})]})
    async with client.get("/webapi/monitors/export") as r:
        assert r.status == 200 and r.content_type == "application/toml"
        text = await r.text()
    doc = tomllib.loads(text)
    async with client.get("/webapi/monitors/export", params={"format": "json"}) as r:
        assert await r.json() == doc
    # The shared URL gets keys so that the file names each monitor once.
    assert len(doc["monitors"]) == 4 and sum("key" in m for m in doc["monitors"]) == 3

    _, token = await store.create_account("other")
    async with aiohttp.ClientSession(
            base_url=api, headers={"Authorization": f"Bearer {token}"}) as fresh:
        status, body = await put(fresh, doc)
        assert status == 200 and len(body["created"]) == 4
        async with fresh.get("/webapi/monitors/export", params={"format": "json"}) as r:
            assert await r.json() == doc
        status, body = await put(fresh, doc)  # and applying it again changes nothing
        assert body["unchanged"] == 4 and not body["created"] + body["updated"]


async def test_the_new_routes_leave_the_monitor_routes_alone(
    client: aiohttp.ClientSession,
) -> None:
    async with client.post("/webapi/monitors", json={"url": "https://a.example/"}) as r:
        created = await r.json()
    async with client.get(f"/webapi/monitors/{created['id']}") as r:
        assert r.status == 200 and (await r.json())["id"] == created["id"]
    async with client.get("/webapi/monitors") as r:
        assert r.status == 200 and len(await r.json()) == 1
    for method, path in (("PUT", "/webapi/monitors/export"),
                         ("DELETE", "/webapi/monitors/export"),
                         ("GET", "/webapi/monitors/export/statistics")):
        async with client.request(method, path) as r:
            assert r.status == 404, (method, path)
    async with client.delete("/webapi/monitors") as r:
        assert r.status == 405
    async with client.put("/webapi/monitors", params={"prune": "maybe"}, json={}) as r:
        assert r.status == 422 and list((await r.json())["errors"]) == ["prune"]


async def test_a_large_set_is_accepted_above_the_usual_body_limit(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str],
) -> None:
    doc = {"monitors": [entry(f"https://h{i}.example/{'p' * 40}") for i in range(1000)]}
    status, body = await put(client, doc, dry_run="true")
    assert status == 200 and len(body["created"]) == 1000
    async with client.put("/webapi/monitors/1", data=b"x" * (65 * 1024)) as r:
        assert r.status == 413  # other routes keep the 64 KiB limit



def _nested(depth: int) -> str:
    """JSON text of a value nested ``depth`` deep (objects and arrays by turns): built as
    text, as JSON encoders refuse to write it."""
    opens = "".join('{"a": ' if n % 2 == 0 else "[" for n in range(depth))
    closes = "".join("}" if n % 2 == 0 else "]" for n in reversed(range(depth)))
    return f"{opens}1{closes}"


DEEP = _nested(1000)
URL = '"url": "https://a.example/"'


@pytest.mark.parametrize(("text", "field"), [
    (f'{{"monitors": [{{{URL}, "alias": {DEEP}}}]}}', "monitors[0].alias"),
    (f'{{"monitors": [{{{URL}, "uptime": {DEEP}}}]}}', "monitors[0].uptime.a"),
    (f'{{"monitors": [{{{URL}, "request": {{"headers": {DEEP}}}}}]}}',
     "monitors[0].request.headers.a"),
    (f'{{"monitors": [{{{URL}, "assertions": [{DEEP}]}}]}}', "monitors[0].assertions.0.source"),
    (f'{{"monitors": [{DEEP}]}}', "monitors[0].a"),
    (f'{{"monitors": {DEEP}}}', "monitors"),
    (_nested(1100), "body"),
])
async def test_a_set_nested_deep_is_a_422_naming_the_field(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str], text: str,
    field: str,
) -> None:
    async with client.put("/webapi/monitors", data=text.encode(),
                          headers={"Content-Type": "application/json"}) as r:
        status, body = r.status, await r.json()
    assert status == 422, body
    assert field in body["errors"], body
    assert await rows(store, account[0].id) == []
