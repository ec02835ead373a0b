"""``/pingping/webapi``: the /webapi operations as PingPing clients expect them.

Every operation through the mount, with a Bearer header and with ``?api_key=``; the four
differences (list envelope, 200 on create and delete, ``?foo`` stored as ``?foo=``, the query
token) and nothing else: the same monitors, shapes and error answers as /webapi.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from yarl import URL

from engine.db.store import Store
from engine.runtime.settings import Settings
from engine.web import pingping
from engine.web.app import create_app
from engine.web.keys import OPENAPI_DOCUMENT

MOUNT = "/pingping/webapi"
UNAUTHENTICATED = {"message": "Unauthenticated."}
REDUCED_KEYS = {"id", "identifier", "alias", "scheme", "host", "url", "status_page", "checks"}


class Client:
    """Requests to one mount, authenticated the way a PingPing client does it: a Bearer
    header, or the token in ``?api_key=``."""

    def __init__(self, session: aiohttp.ClientSession, token: str, how: str, base: str) -> None:
        self.session, self.token, self.how, self.base = session, token, how, base

    def request(self, method: str, path: str, **kw: Any) -> Any:
        params = dict(kw.pop("params", {}))
        headers = dict(kw.pop("headers", {}))
        if self.how == "api_key":
            params["api_key"] = self.token
        else:
            headers["Authorization"] = f"Bearer {self.token}"
        return self.session.request(
            method, self.base + path, params=params, headers=headers, **kw)

    async def call(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        async with self.request(method, path, **kw) as r:
            raw = await r.read()
            if raw:
                assert r.content_type == "application/json", (r.status, raw[:200])
            return r.status, orjson.loads(raw) if raw else None


@pytest.fixture
async def session(api: str) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=api) as s:
        yield s


@pytest.fixture(params=["bearer", "api_key"])
def mount(request: Any, session: aiohttp.ClientSession, account: tuple[Any, str]) -> Client:
    return Client(session, account[1], request.param, MOUNT)


@pytest.fixture
def webapi(session: aiohttp.ClientSession, account: tuple[Any, str]) -> Client:
    return Client(session, account[1], "bearer", "/webapi")


# --- every operation -----------------------------------------------------------------------


async def test_create_answers_200_with_the_reduced_monitor_and_a_normalised_query(
    mount: Client, webapi: Client
) -> None:
    status, body = await mount.call(
        "POST", "/monitors", json={"url": "https://Example.com/?foo", "alias": "Shop"})
    assert status == 200, body
    assert set(body) == REDUCED_KEYS
    assert body["url"] == "https://example.com/?foo="
    assert body["alias"] == "Shop"
    for check in body["checks"].values():
        assert set(check) == {"id", "status", "interval", "is_enabled"}
        assert check["status"] == "pending"
    # Stored so: /webapi shows the same monitor with the same URL.
    status, full = await webapi.call("GET", f"/monitors/{body['id']}")
    assert status == 200
    assert full["url"] == "https://example.com/?foo="


async def test_the_list_is_an_object_with_data_holding_the_webapi_list(
    mount: Client, webapi: Client
) -> None:
    status, empty = await mount.call("GET", "/monitors")
    assert (status, empty) == (200, {"data": []})
    for i in range(2):
        assert (await webapi.call("POST", "/monitors", json={"url": f"https://e{i}.example/"}))[0] \
            == 201
    status, listed = await mount.call("GET", "/monitors")
    assert status == 200
    assert set(listed) == {"data"}
    assert listed["data"] == (await webapi.call("GET", "/monitors"))[1]
    assert len(listed["data"]) == 2


async def test_get_and_statistics_answer_as_webapi(mount: Client, webapi: Client) -> None:
    _, created = await webapi.call("POST", "/monitors", json={"url": "https://example.com/"})
    mid = created["id"]
    for path in (f"/monitors/{mid}", f"/monitors/{mid}/statistics"):
        status, body = await mount.call("GET", path)
        assert status == 200
        assert (200, body) == await webapi.call("GET", path)
    status, body = await mount.call("GET", f"/monitors/{mid}")
    assert "port" in body and "meta" in body["checks"]["uptime"]


async def test_update_changes_alias_and_normalises_the_query_of_a_new_url(
    mount: Client, webapi: Client
) -> None:
    _, created = await mount.call("POST", "/monitors", json={"url": "https://example.com/"})
    mid = created["id"]
    status, body = await mount.call("PUT", f"/monitors/{mid}", json={"alias": "Renamed"})
    assert status == 200
    assert set(body) == REDUCED_KEYS
    assert body["alias"] == "Renamed"
    status, body = await mount.call(
        "PUT", f"/monitors/{mid}", json={"url": " https://example.com/search?q&page=2&&x "})
    assert status == 200, body
    assert body["url"] == "https://example.com/search?q=&page=2&&x="
    assert (await webapi.call("GET", f"/monitors/{mid}"))[1]["url"] == body["url"]
    # A URL without a query, or with every value given, is stored as /webapi stores it.
    for url in ("https://example.com/a", "https://example.com/?a=1&b=", "https://example.com/?"):
        status, body = await mount.call("PUT", f"/monitors/{mid}", json={"url": url})
        _, via_webapi = await webapi.call("PUT", f"/monitors/{mid}", json={"url": url})
        assert status == 200
        assert body["url"] == via_webapi["url"]


async def test_checks_update_enable_and_disable_answer_as_webapi(
    mount: Client, webapi: Client
) -> None:
    _, created = await webapi.call("POST", "/monitors", json={"url": "https://example.com/"})
    up = created["checks"]["uptime"]["id"]
    status, body = await mount.call(
        "PUT", f"/checks/{up}", json={"interval": 300, "notification_threshold": 60})
    assert status == 200
    assert body["interval"] == 300 and body["notification_threshold"] == 60
    assert set(body) == {"id", "status", "interval", "is_enabled", "notification_threshold",
                         "last_check_at"}
    assert (await mount.call("POST", f"/checks/{up}/disable")) == (
        200, {"id": up, "is_enabled": False, "status": "paused"})
    assert (await mount.call("POST", f"/checks/{up}/enable")) == (
        200, {"id": up, "is_enabled": True, "status": "pending"})
    _, full = await webapi.call("GET", f"/monitors/{created['id']}")
    assert full["checks"]["uptime"]["interval"] == 300
    assert full["checks"]["uptime"]["is_enabled"] is True


async def test_delete_answers_200_with_an_empty_object_and_the_monitor_is_gone(
    mount: Client, webapi: Client, store: Store
) -> None:
    _, created = await webapi.call("POST", "/monitors", json={"url": "https://example.com/"})
    mid = created["id"]
    assert await mount.call("DELETE", f"/monitors/{mid}") == (200, {})
    for client in (mount, webapi):
        assert (await client.call("GET", f"/monitors/{mid}"))[0] == 404
    assert await store.pool.fetchval("SELECT count(*) FROM monitors") == 0
    # A second delete is the 404 /webapi answers.
    assert await mount.call("DELETE", f"/monitors/{mid}") == await webapi.call(
        "DELETE", f"/monitors/{mid}")


async def test_a_monitor_made_through_one_mount_is_listed_by_the_other(
    mount: Client, webapi: Client
) -> None:
    _, a = await mount.call("POST", "/monitors", json={"url": "https://a.example/?x"})
    _, b = await webapi.call("POST", "/monitors", json={"url": "https://b.example/?x"})
    via_webapi = {m["id"]: m for m in (await webapi.call("GET", "/monitors"))[1]}
    via_mount = {m["id"]: m for m in (await mount.call("GET", "/monitors"))[1]["data"]}
    assert via_webapi == via_mount
    assert set(via_mount) == {a["id"], b["id"]}
    # Each mount normalises what it is given: /webapi keeps api.md's URL as it is.
    assert via_mount[a["id"]]["url"] == "https://a.example/?x="
    assert via_mount[b["id"]]["url"] == "https://b.example/?x"


# --- errors are /webapi's ------------------------------------------------------------------


async def test_validation_and_not_found_answers_are_the_same_as_webapi(
    mount: Client, webapi: Client
) -> None:
    _, created = await webapi.call("POST", "/monitors", json={"url": "https://example.com/"})
    up = created["checks"]["uptime"]["id"]
    cert = created["checks"]["certificate_health"]["id"]
    cases: list[tuple[str, str, Any]] = [
        ("POST", "/monitors", {}),
        ("POST", "/monitors", {"url": 5}),
        ("POST", "/monitors", {"url": "https://example.com/", "interval": 7}),
        ("PUT", f"/monitors/{created['id']}", {"url": "https://user@example.com/?a"}),
        ("PUT", f"/checks/{up}", {"interval": 31}),
        ("PUT", f"/checks/{cert}", {"notification_threshold": 60}),
        ("GET", "/monitors/999999", None),
        ("GET", "/monitors/abc", None),
        ("PUT", "/monitors/999999", {"alias": "x"}),
        ("DELETE", "/monitors/999999", None),
        ("GET", "/monitors/999999/statistics", None),
        ("PUT", "/checks/999999", {"interval": 60}),
        ("POST", "/checks/999999/enable", None),
        ("POST", "/checks/999999/disable", None),
    ]
    for method, path, body in cases:
        kw = {} if body is None else {"json": body}
        got = await mount.call(method, path, **kw)
        assert got[0] in (404, 422), (method, path, got)
        assert got == await webapi.call(method, path, **kw), (method, path)
    # A scheme the hosted service did not have: its own words, whatever /webapi now takes.
    words = "The url must be an absolute URL with scheme http or https."
    assert await mount.call("POST", "/monitors", json={"url": "ftp://example.com/?foo"}) == (
        422, {"message": words, "errors": {"url": [words]}})
    # A body that is not JSON.
    got = await mount.call("POST", "/monitors", data=b"{not json")
    assert got == await webapi.call("POST", "/monitors", data=b"{not json")
    assert got[0] == 422


async def test_an_unknown_path_or_method_on_the_mount_is_a_json_404_or_405(
    mount: Client,
) -> None:
    async with mount.request("PATCH", "/monitors") as r:
        assert r.status == 405
        assert set(r.headers["Allow"].split(",")) == {"GET", "HEAD", "POST"}
        assert await r.json() == {"message": "Method not allowed."}
    for path in ("/nope", "", "/monitors/1/nope"):
        async with mount.request("GET", path) as r:
            assert r.status == 404, path
            assert r.content_type == "application/json"
            assert await r.json() == {"message": "Not found."}


async def test_the_upwatch_additions_are_not_on_the_mount(
    mount: Client, webapi: Client
) -> None:
    # account, webhook log, nodes, the OpenAPI document: /webapi only.
    for method, path in (("GET", "/account"), ("PUT", "/account"), ("GET", "/webhooks"),
                         ("POST", "/webhooks/1/retry"), ("GET", "/nodes"),
                         ("GET", "/openapi.json")):
        status, body = await mount.call(method, path)
        assert (status, body) == (404, {"message": "Not found."}), path
    assert (await webapi.call("GET", "/account"))[0] == 200


@pytest.mark.parametrize("how", ["none", "bad bearer", "bad api_key", "empty api_key"])
async def test_a_failed_authentication_is_the_webapi_401(
    api: str, session: aiohttp.ClientSession, store: Store, how: str
) -> None:
    params, headers = {}, {}
    if how == "bad bearer":
        headers["Authorization"] = "Bearer uw_not-a-token"
    elif how == "bad api_key":
        params["api_key"] = "uw_not-a-token"
    elif how == "empty api_key":
        params["api_key"] = ""
    for method, path in (("GET", "/monitors"), ("POST", "/monitors"), ("GET", "/monitors/1"),
                         ("DELETE", "/monitors/1"), ("POST", "/checks/1/enable"),
                         ("GET", "/nope")):
        async with session.request(method, MOUNT + path, params=params, headers=headers,
                                   json={"url": "https://example.com/"}) as r:
            assert r.status == 401, (how, method, path)
            assert r.headers["WWW-Authenticate"] == "Bearer"
            assert await r.json() == UNAUTHENTICATED
    assert await store.pool.fetchval("SELECT count(*) FROM monitors") == 0


async def test_ambiguous_query_credentials_are_refused(
    api: str, session: aiohttp.ClientSession, account: tuple[Any, str], store: Store
) -> None:
    _, token = account
    other = (await store.create_account("other"))[1]
    refused: list[tuple[str, dict[str, str]]] = [
        # the header and the query both: even the same token twice is one too many
        (f"api_key={token}", {"Authorization": f"Bearer {token}"}),
        (f"api_key={token}", {"Authorization": f"Bearer {other}"}),
        (f"api_key={token}&api_key={token}", {}),
        (f"api_key={token}&api_key={other}", {}),
        # other token-looking names stay refused on the mount too, even beside api_key
        (f"token={token}", {}),
        (f"API_KEY={token}", {}),
        (f"api_key={token}&access_token={token}", {}),
        # a percent-encoded name is not taken for api_key, and not let through either
        (f"api%5Fkey={token}", {}),
    ]
    for query, headers in refused:
        # encoded=True: sent as written (the client would requote "%5F" to "_").
        url = URL(f"{api}{MOUNT}/monitors?{query}", encoded=True)
        async with session.get(url, headers=headers) as r:
            assert r.status == 401, query
            assert await r.json() == UNAUTHENTICATED
    # Other query parameters beside api_key are no credential and pass.
    async with session.get(f"{MOUNT}/monitors?page=1&api_key={token}&x") as r:
        assert r.status == 200


async def test_webapi_keeps_refusing_a_token_in_the_query(
    session: aiohttp.ClientSession, account: tuple[Any, str], store: Store
) -> None:
    _, token = account
    async with session.get("/webapi/monitors", params={"api_key": token}) as r:
        assert r.status == 401
        assert await r.json() == UNAUTHENTICATED
    async with session.post("/webapi/monitors", params={"api_key": token},
                            json={"url": "https://example.com/"}) as r:
        assert r.status == 401
    assert await store.pool.fetchval("SELECT count(*) FROM monitors") == 0


async def test_a_header_of_undecodable_bytes_beside_api_key_is_a_401_not_a_500(
    api: str, account: tuple[Any, str]
) -> None:
    host, port = api.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            b"GET " + MOUNT.encode() + b"/monitors?api_key=" + account[1].encode()
            + b" HTTP/1.1\r\nHost: x\r\nX-Odd: \xff\xfe\r\nConnection: close\r\n\r\n")
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    status = int(response.split(b" ", 2)[1])
    # The clone that would carry the token cannot re-encode the header: the request stays
    # as it came, and its query token is refused (or the parser refuses the header first).
    assert status in (400, 401), response[:300]
    assert account[1].encode() not in response


async def test_a_rotated_token_stops_working_through_api_key_at_once(
    session: aiohttp.ClientSession, store: Store
) -> None:
    acc, old = await store.create_account("rotating")
    async with session.get(f"{MOUNT}/monitors", params={"api_key": old}) as r:
        assert r.status == 200  # and now remembered by the authentication cache
    rotated = await store.rotate_token(acc.id)
    assert rotated is not None
    async with session.get(f"{MOUNT}/monitors", params={"api_key": old}) as r:
        assert r.status == 401
    async with session.get(f"{MOUNT}/monitors", params={"api_key": rotated[1]}) as r:
        assert r.status == 200


async def test_error_answers_never_echo_the_api_key(
    session: aiohttp.ClientSession, account: tuple[Any, str]
) -> None:
    _, token = account
    for method, path, body in (
        ("GET", "/monitors/999", None), ("GET", "/nope", None), ("PATCH", "/monitors", None),
        ("POST", "/monitors", {"url": f"https://example.com/?api_key={token}&x",
                               "interval": 1}),
        ("POST", "/monitors", b"not json"),
    ):
        kw: dict[str, Any] = {"json": body} if isinstance(body, dict) else {"data": body}
        for key in (token, token + "x"):  # accepted, and refused
            async with session.request(method, MOUNT + path, params={"api_key": key},
                                       **kw) as r:
                assert r.status >= 400
                raw = await r.read()
                assert token.encode() not in raw, (method, path, raw)
                assert all(token not in v for v in r.headers.values())


# --- rate limit, logs, metrics, documentation ----------------------------------------------


@pytest.fixture
async def limited_api(store: Store, tmp_path: Path) -> AsyncIterator[str]:
    from tests.support.web import serve

    settings = Settings(data_dir=tmp_path / "data", allow_private_targets=True, port=0,
                        base_url="http://127.0.0.1:8080", rate_limit_per_second=0.01,
                        rate_limit_burst=3)
    async with serve(create_app(store, settings)) as url:
        yield url


async def test_a_flood_through_api_key_is_limited_per_account(
    limited_api: str, store: Store
) -> None:
    _, token = await store.create_account("flooder")
    _, bystander = await store.create_account("bystander")
    async with aiohttp.ClientSession(base_url=limited_api) as s:
        statuses = []
        for _ in range(5):
            async with s.get(f"{MOUNT}/monitors", params={"api_key": token}) as r:
                statuses.append(r.status)
                if r.status == 429:
                    assert int(r.headers["Retry-After"]) >= 1
                    assert await r.json() == {"message": "Too many requests."}
        assert statuses == [200, 200, 200, 429, 429]
        # One bucket per account, whichever mount and token source: /webapi is limited too.
        async with s.get("/webapi/monitors", headers={"Authorization": f"Bearer {token}"}) as r:
            assert r.status == 429
        async with s.get(f"{MOUNT}/monitors", params={"api_key": bystander}) as r:
            assert r.status == 200


async def test_no_log_line_holds_the_api_key_and_access_lines_show_the_path_only(
    session: aiohttp.ClientSession, account: tuple[Any, str], store: Store,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, token = account
    caplog.set_level(logging.DEBUG)
    _, created = await Client(session, token, "api_key", MOUNT).call(
        "POST", "/monitors", json={"url": "https://example.com/"})
    for method, path, kw in (
        ("GET", "/monitors", {}), ("GET", f"/monitors/{created['id']}", {}),
        ("GET", "/monitors/999", {}), ("PATCH", "/monitors", {}),
        ("POST", "/monitors", {"data": b"{"}), ("GET", "/nope", {}),
        ("DELETE", f"/monitors/{created['id']}", {}),
    ):
        for key in (token, token + "x"):
            async with session.request(method, MOUNT + path, params={"api_key": key},
                                       **kw) as r:
                await r.read()
    # The database going away mid-request is logged with the request's path.
    await store.pool.close()
    async with session.get(f"{MOUNT}/monitors", params={"api_key": token + "y"}) as r:
        assert r.status in (401, 503)
    # The access line is written after the response: wait for the last one.
    async with asyncio.timeout(5):
        while sum("aiohttp.access" == rec.name for rec in caplog.records) < 16:
            await asyncio.sleep(0.01)
    lines = [caplog.handler.format(rec) for rec in caplog.records]
    assert lines
    for line in lines:
        assert token not in line, line
    access = [rec.getMessage() for rec in caplog.records if rec.name == "aiohttp.access"]
    assert any(f'"GET {MOUNT}/monitors" 200' in line for line in access), access
    assert all("?" not in line for line in access), access


async def test_mount_requests_are_counted_under_their_own_route(
    mount: Client, session: aiohttp.ClientSession
) -> None:
    assert (await mount.call("GET", "/monitors"))[0] == 200
    async with session.get("/metrics") as r:
        text = await r.text()
    assert f'route="{MOUNT}/monitors",status="200"' in text


def test_the_openapi_document_and_the_app_routes_describe_webapi_only(
    settings: Settings,
) -> None:
    app = create_app(None, settings)  # type: ignore[arg-type]  # only the routes are read
    doc = orjson.loads(app[OPENAPI_DOCUMENT])
    assert not [p for p in doc["paths"] if p.startswith("/pingping")]
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource else {}
        assert not str(info.get("path") or info.get("formatter") or "").startswith("/pingping")
    # Every mounted operation is a documented /webapi one.
    for method, path in pingping.MOUNTED:
        assert method.lower() in doc["paths"][path], (method, path)


def test_a_mounted_operation_missing_from_webapi_stops_the_start() -> None:
    from aiohttp import web

    with pytest.raises(LookupError, match="/webapi/monitors"):
        pingping.mount(web.RouteTableDef())


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("https://example.com/?foo", "https://example.com/?foo="),
        ("https://example.com?foo", "https://example.com?foo="),
        ("https://example.com/?foo=", "https://example.com/?foo="),
        ("https://example.com/?a&b=1&c", "https://example.com/?a=&b=1&c="),
        ("https://example.com/?a&&b", "https://example.com/?a=&&b="),
        ("https://example.com/?a=b=c&d", "https://example.com/?a=b=c&d="),
        ("https://example.com/?a%20b", "https://example.com/?a%20b="),
        ("https://example.com/?", "https://example.com/?"),
        ("https://example.com/path", "https://example.com/path"),
        ("https://example.com/#frag?x", "https://example.com/#frag?x"),
        ("https://example.com/?x#frag", "https://example.com/?x=#frag"),
        ("  https://example.com/?x  ", "https://example.com/?x="),
    ],
)
def test_a_key_without_a_value_gains_an_equals_sign(given: str, stored: str) -> None:
    assert pingping.normalise_query(given) == stored
