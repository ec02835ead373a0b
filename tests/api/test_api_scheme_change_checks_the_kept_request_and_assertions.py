"""A monitor whose URL moves to another scheme (http -> dns, tcp -> smtp, http -> icmp, ...)
keeps only the stored request and assertions the new scheme accepts: an update that leaves
out ones the new scheme refuses is a 422 naming the field, and nothing changes; one that
replaces them (or removes them with null) is taken. Monitors as code follow each entry's
own request and assertions."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.probes.icmp import ping_access

HTTP_ASSERTIONS = [{"source": "status_code", "comparison": "equals", "target": 200}]
TCP_ASSERTIONS = [{"source": "response", "comparison": "contains", "target": "OK"}]
DNS_ASSERTIONS = [{"source": "answers", "comparison": "all_equal", "target": "192.0.2.1"}]
DNS_URL = "dns://127.0.0.1/example.com?type=A"


async def call(client: aiohttp.ClientSession, method: str, path: str, **kw: Any
               ) -> tuple[int, Any]:
    async with client.request(method, path, **kw) as r:
        return r.status, await r.json()


async def made(client: aiohttp.ClientSession, **body: Any) -> dict[str, Any]:
    status, monitor = await call(client, "POST", "/webapi/monitors", json=body)
    assert status == 201, monitor
    got: dict[str, Any]
    _, got = await call(client, "GET", f"/webapi/monitors/{monitor['id']}")
    return got


async def stored(store: Store, monitor_id: int) -> tuple[Any, ...]:
    async with store.pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT url, request, assertions FROM monitors WHERE id = $1", monitor_id)
    return tuple(row)


async def test_http_to_dns_needs_the_request_and_assertions_replaced(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await made(client, url="https://example.com/",
                   request={"method": "POST", "headers": {"X-Team": "ops"}, "body": "{}"},
                   assertions=HTTP_ASSERTIONS)
    before = await stored(store, m["id"])
    path = f"/webapi/monitors/{m['id']}"

    status, answer = await call(client, "PUT", path, json={"url": DNS_URL})
    assert status == 422, answer
    assert set(answer["errors"]) == {"request", "assertions.0.source"}, answer
    assert "dns://" in " ".join(answer["errors"]["assertions.0.source"])
    assert await stored(store, m["id"]) == before

    # New assertions alone: the stored request still does not fit.
    status, answer = await call(client, "PUT", path,
                                json={"url": DNS_URL, "assertions": DNS_ASSERTIONS})
    assert status == 422 and set(answer["errors"]) == {"request"}, answer
    assert await stored(store, m["id"]) == before

    status, answer = await call(client, "PUT", path, json={
        "url": DNS_URL, "request": None, "assertions": DNS_ASSERTIONS})
    assert status == 200, answer
    _, got = await call(client, "GET", path)
    assert got["url"] == DNS_URL and got.get("request") is None
    assert [(a["source"], a["comparison"], a["target"]) for a in got["assertions"]] == [
        ("answers", "all_equal", "192.0.2.1")]


async def test_what_fits_the_new_scheme_is_kept(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await made(client, url="tcp://127.0.0.1:7", request={"body": "PING\r\n"},
                   assertions=TCP_ASSERTIONS)
    path = f"/webapi/monitors/{m['id']}"
    # tcp -> tls: a response assertion is tls's too (the body, sent to another origin, is
    # sent again).
    status, answer = await call(client, "PUT", path, json={"url": "tls://127.0.0.1:7",
                                                            "request": {"body": "PING\r\n"}})
    assert status == 200, answer
    _, got = await call(client, "GET", path)
    assert got["url"] == "tls://127.0.0.1:7"
    assert got["request"]["body"] == "PING\r\n"
    assert [(a["source"], a["target"]) for a in got["assertions"]] == [("response", "OK")]

    # tls -> smtp: a mail monitor sends no body.
    before = await stored(store, m["id"])
    status, answer = await call(client, "PUT", path, json={"url": "smtp://127.0.0.1"})
    assert status == 422 and set(answer["errors"]) == {"request.body"}, answer
    assert await stored(store, m["id"]) == before
    status, answer = await call(client, "PUT", path,
                                json={"url": "smtp://127.0.0.1", "request": None})
    assert status == 200, answer
    _, got = await call(client, "GET", path)
    assert got.get("request") is None and got["assertions"][0]["source"] == "response"

    # smtp -> https: a response assertion is not an HTTP one.
    status, answer = await call(client, "PUT", path, json={"url": "https://example.com/"})
    assert status == 422 and "assertions.0.source" in answer["errors"], answer
    status, answer = await call(client, "PUT", path,
                                json={"url": "https://example.com/", "assertions": None})
    assert status == 200, answer
    _, got = await call(client, "GET", path)
    assert got["url"] == "https://example.com/" and got.get("assertions") is None


async def test_an_update_that_keeps_its_scheme_is_unchanged(
    client: aiohttp.ClientSession,
) -> None:
    m = await made(client, url="https://example.com/", request={"headers": {"X-A": "1"}},
                   assertions=HTTP_ASSERTIONS)
    path = f"/webapi/monitors/{m['id']}"
    status, answer = await call(client, "PUT", path, json={"url": "http://example.org/x"})
    assert status == 200, answer
    _, got = await call(client, "GET", path)
    assert got["request"]["headers"] == {"X-A": "1"}
    assert got["assertions"][0]["source"] == "status_code"


@pytest.mark.skipif(not ping_access().can_ping, reason="this node can open no ICMP socket")
async def test_http_to_icmp_names_the_stored_request(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    m = await made(client, url="https://example.com/", request={"method": "HEAD"},
                   assertions=HTTP_ASSERTIONS)
    path = f"/webapi/monitors/{m['id']}"
    before = await stored(store, m["id"])
    status, answer = await call(client, "PUT", path,
                                json={"url": "icmp://127.0.0.1", "assertions": None})
    assert status == 422 and set(answer["errors"]) == {"request"}, answer
    assert await stored(store, m["id"]) == before
    status, answer = await call(client, "PUT", path, json={
        "url": "icmp://127.0.0.1", "request": None,
        "assertions": [{"source": "packet_loss", "comparison": "less_than", "target": 50}]})
    assert status == 200, answer
    _, got = await call(client, "GET", path)
    assert got["url"] == "icmp://127.0.0.1" and got.get("request") is None
    assert got["assertions"][0]["source"] == "packet_loss"


async def test_monitors_as_code_checks_each_entry_by_its_own_scheme(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    status, answer = await call(client, "PUT", "/webapi/monitors", json={"monitors": [
        {"key": "a", "url": "https://example.com/", "assertions": HTTP_ASSERTIONS}]})
    assert status == 200, answer
    _, [m] = await call(client, "GET", "/webapi/monitors")
    before = await stored(store, m["id"])
    # The entry moves to dns:// with the http assertions: refused, naming the entry's field.
    status, answer = await call(client, "PUT", "/webapi/monitors", json={"monitors": [
        {"key": "a", "url": DNS_URL, "assertions": HTTP_ASSERTIONS}]})
    assert status == 422, answer
    assert any(k.startswith("monitors[0].assertions.0") or
               k.startswith("monitors.0.assertions.0") for k in answer["errors"]), answer
    assert await stored(store, m["id"]) == before
    # Without them, the entry says the monitor has none: the same monitor, moved.
    status, answer = await call(client, "PUT", "/webapi/monitors", json={"monitors": [
        {"key": "a", "url": DNS_URL}]})
    assert status == 200, answer
    _, got = await call(client, "GET", f"/webapi/monitors/{m['id']}")
    assert got["url"] == DNS_URL and got.get("assertions") is None
