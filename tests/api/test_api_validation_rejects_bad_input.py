"""Hostile and malformed input gets a 4xx with the documented body, never a 500, and
leaves nothing half-written behind."""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from engine.db.store import Store

ROWS = ("monitors", "checks", "check_periods")


async def counts(store: Store) -> dict[str, int]:
    async with store.pool.acquire() as conn:
        return {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in ROWS}


async def create(client: aiohttp.ClientSession, **body: Any) -> dict[str, Any]:
    async with client.post("/webapi/monitors", json=body) as r:
        assert r.status == 201, await r.text()
        data: dict[str, Any] = await r.json()
        return data


async def expect_422(
    client: aiohttp.ClientSession, method: str, path: str, field: str, **kw: Any
) -> dict[str, Any]:
    async with client.request(method, path, **kw) as r:
        assert r.status == 422, await r.text()
        assert r.headers["Content-Type"] == "application/json"
        body: dict[str, Any] = await r.json()
    assert set(body) == {"message", "errors"}
    assert isinstance(body["message"], str) and body["message"]
    assert field in body["errors"], body
    for messages in body["errors"].values():
        assert messages and all(isinstance(m, str) for m in messages)
    return body


BAD_CREATE_BODIES: list[tuple[dict[str, Any], str]] = [
    ({}, "url"),
    ({"alias": "x"}, "url"),
    ({"url": None}, "url"),
    ({"url": ""}, "url"),
    ({"url": "example.com"}, "url"),
    ({"url": "ftp://example.com/"}, "url"),
    ({"url": "https://user:secret@example.com/"}, "url"),
    ({"url": "https://example.com/" + "a" * 2048}, "url"),
    ({"url": "https://example.com/\r\nX-Injected: yes"}, "url"),
    ({"url": 123}, "url"),
    ({"url": ["https://example.com"]}, "url"),
    ({"url": {"href": "https://example.com"}}, "url"),
    ({"url": "https://example.com", "alias": "a\r\nX-Injected: yes"}, "alias"),
    ({"url": "https://example.com", "alias": "nul\u0000byte"}, "alias"),
    ({"url": "https://example.com", "alias": ""}, "alias"),
    ({"url": "https://example.com", "alias": "x" * 256}, "alias"),
    ({"url": "https://example.com", "alias": 7}, "alias"),
    ({"url": "https://example.com", "interval": "30"}, "interval"),
    ({"url": "https://example.com", "interval": True}, "interval"),
    ({"url": "https://example.com", "interval": 30.5}, "interval"),
    ({"url": "https://example.com", "interval": -30}, "interval"),
    ({"url": "https://example.com", "interval": 0}, "interval"),
    ({"url": "https://example.com", "interval": 45}, "interval"),
    ({"url": "https://example.com", "interval": 10**18}, "interval"),
    ({"url": "https://example.com", "interval": 1e300}, "interval"),
    ({"url": "https://example.com", "interval": [30]}, "interval"),
    ({"url": "https://example.com", "notification_threshold": 45}, "notification_threshold"),
    ({"url": "https://example.com", "notification_threshold": "0"}, "notification_threshold"),
    ({"url": "https://example.com", "notification_threshold": -15}, "notification_threshold"),
]


async def test_bad_create_bodies_are_422_under_their_field(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    # One server for all cases: each test pays for a fresh database.
    before = await counts(store)
    for body, field in BAD_CREATE_BODIES:
        await expect_422(client, "POST", "/webapi/monitors", field, json=body)
        assert await counts(store) == before, body


async def test_all_field_errors_come_back_at_once(client: aiohttp.ClientSession) -> None:
    body = await expect_422(client, "POST", "/webapi/monitors", "url",
                            json={"url": "ftp://x", "interval": 1, "notification_threshold": 2})
    assert set(body["errors"]) == {"url", "interval", "notification_threshold"}
    assert body["message"] == body["errors"]["url"][0]


NOT_OBJECTS = [
    b"not json", b"{", b"\xff\xfe\x00", b"[]", b'[{"url": "https://example.com"}]', b'"x"',
    b"42", b"null", b"[" * 10_000 + b"]" * 10_000, b'{"url":' + b"[" * 2000 + b"]" * 2000 + b"}",
    b"NaN", b'{"url": "https://example.com", "interval": 1e999}',
]


async def test_bodies_that_are_not_a_json_object_are_422_under_body(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    before = await counts(store)
    headers = {"Content-Type": "application/json"}
    for raw in NOT_OBJECTS:
        for method, path in (("POST", "/webapi/monitors"), ("PUT", "/webapi/account")):
            body = await expect_422(client, method, path, "body", data=raw, headers=headers)
            assert list(body["errors"]) == ["body"]
    assert await counts(store) == before


async def test_a_body_without_content_type_is_read_as_json(
    client: aiohttp.ClientSession,
) -> None:
    async with client.post(
        "/webapi/monitors", data=b'{"url": "https://example.com"}',
        skip_auto_headers=["Content-Type"],
    ) as r:
        assert r.status == 201, await r.text()
    async with client.post(
        "/webapi/monitors", data=b'{"url": "https://example.net"}',
        headers={"Content-Type": "text/plain"},
    ) as r:
        assert r.status == 201


async def test_unknown_fields_are_ignored(client: aiohttp.ClientSession) -> None:
    created = await create(client, url="https://example.com", id=999, identifier="mine",
                           checks={"uptime": {"status": "ok"}}, status="ok")
    assert created["id"] != 999
    assert created["identifier"] != "mine"
    assert created["checks"]["uptime"]["status"] == "pending"


VERBATIM = [
    "Ünïcödé 漢字 🙂", "'; DROP TABLE monitors; --", "Robert'); DELETE FROM checks;--",
    "<img src=x onerror=alert(1)>", "%s %d {0} ${x} $1", "\u202eevil", "\\x00 \\r\\n",
]


async def test_unicode_and_sql_like_strings_are_stored_verbatim(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    for alias in VERBATIM:
        created = await create(client, url="https://example.com", alias=alias)
        assert created["alias"] == alias
        async with client.get(f"/webapi/monitors/{created['id']}") as r:
            assert (await r.json())["alias"] == alias
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM monitors") == len(VERBATIM)
        # uptime, certificate and domain checks
        assert await conn.fetchval("SELECT count(*) FROM checks") == 3 * len(VERBATIM)


async def test_an_oversized_declared_body_is_413_and_the_server_carries_on(
    api: str, account: tuple[Any, str], store: Store,
) -> None:
    _, token = account
    host, port = urlsplit(api).hostname, urlsplit(api).port
    assert host and port
    reader, writer = await asyncio.open_connection(host, port)
    try:
        head = (
            "POST /webapi/monitors HTTP/1.1\r\n"
            f"Host: {host}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {10 * 1024 * 1024}\r\n\r\n"
        )
        writer.write(head.encode() + b"{" + b" " * 65536)
        await writer.drain()
        # The answer comes before the body is sent: nothing of it was read.
        headers = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        length = int(headers.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        body = await asyncio.wait_for(reader.readexactly(length), 5)
    finally:
        writer.close()
    assert headers.startswith(b"HTTP/1.1 413")
    assert b"Content-Type: application/json" in headers
    assert b"Connection: close" in headers
    assert body == b'{"message":"The request body is too large (at most 64 KiB)."}'
    assert (await counts(store))["monitors"] == 0


async def test_a_ten_mib_body_from_a_client_is_413(client: aiohttp.ClientSession) -> None:
    payload = b'{"url": "https://example.com", "alias": "' + b"a" * (10 * 1024 * 1024) + b'"}'
    try:
        async with client.post("/webapi/monitors", data=payload,
                               headers={"Content-Type": "application/json"}) as r:
            assert r.status == 413
            assert await r.json() == {
                "message": "The request body is too large (at most 64 KiB)."}
    except aiohttp.ClientOSError:
        # The server may close before the client has finished writing; that is the point.
        pass
    async with client.get("/webapi/monitors") as r:  # and it still serves
        assert r.status == 200


async def test_a_chunked_body_over_the_limit_is_413(client: aiohttp.ClientSession) -> None:
    async def chunks() -> Any:
        for _ in range(20):
            yield b" " * 8192

    async with client.post("/webapi/monitors", data=chunks(),
                           headers={"Content-Type": "application/json"}) as r:
        assert r.status == 413
        assert (await r.json())["message"].startswith("The request body is too large")


async def test_a_body_just_under_the_limit_is_read(client: aiohttp.ClientSession) -> None:
    raw = b'{"url": "https://example.com", "pad": "' + b"p" * (64 * 1024 - 60) + b'"}'
    assert len(raw) <= 64 * 1024
    async with client.post("/webapi/monitors", data=raw) as r:
        assert r.status == 201


BAD_IDS = ["0", "-1", "1.5", "1e3", "abc", "99999999999999999999", str(2**63), "%20", "null"]


async def test_ids_that_cannot_exist_are_404_on_every_endpoint(
    client: aiohttp.ClientSession,
) -> None:
    calls = [
        ("GET", "/webapi/monitors/{}"),
        ("PUT", "/webapi/monitors/{}"),
        ("DELETE", "/webapi/monitors/{}"),
        ("GET", "/webapi/monitors/{}/statistics"),
        ("PUT", "/webapi/checks/{}"),
        ("POST", "/webapi/checks/{}/enable"),
        ("POST", "/webapi/checks/{}/disable"),
    ]
    for method, path in [(m, p.format(bad_id)) for bad_id in BAD_IDS for m, p in calls]:
        async with client.request(method, path, json={"alias": "x"}) as r:
            assert r.status == 404, (method, path, await r.text())
            body = await r.json()
            assert set(body) == {"message"} and isinstance(body["message"], str)


async def test_ids_that_do_not_exist_are_404(client: aiohttp.ClientSession) -> None:
    async with client.get("/webapi/monitors/123456") as r:
        assert r.status == 404
        assert await r.json() == {"message": "Monitor not found."}
    async with client.put("/webapi/checks/123456", json={"interval": 60}) as r:
        assert r.status == 404
        assert await r.json() == {"message": "Check not found."}
    async with client.get(f"/webapi/monitors/{2**63 - 1}/statistics") as r:
        assert r.status == 404


async def test_unknown_paths_and_methods_answer_json(client: aiohttp.ClientSession) -> None:
    async with client.get("/webapi/nothing-here") as r:
        assert r.status == 404
        assert await r.json() == {"message": "Not found."}
    async with client.patch("/webapi/monitors") as r:
        assert r.status == 405
        assert await r.json() == {"message": "Method not allowed."}
        assert "GET" in r.headers["Allow"] and "POST" in r.headers["Allow"]


async def test_a_rejected_update_changes_nothing(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    created = await create(client, url="https://example.com/a", alias="Keep")
    before = await counts(store)
    for body, field in [
        ({"url": "ftp://example.com"}, "url"),
        ({"url": "https://example.com/b", "alias": "\r\n"}, "alias"),
        ({"url": "https://other.example/\nX-Injected: 1", "alias": "New"}, "url"),
        ({"alias": ["x"]}, "alias"),
    ]:
        await expect_422(client, "PUT", f"/webapi/monitors/{created['id']}", field, json=body)
    await expect_422(client, "PUT", f"/webapi/monitors/{created['id']}", "body", data=b"[1]")
    async with client.get(f"/webapi/monitors/{created['id']}") as r:
        now = await r.json()
    assert (now["url"], now["alias"]) == ("https://example.com/a", "Keep")
    assert await counts(store) == before


async def test_check_update_rejects_bad_values_and_keeps_the_check(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    created = await create(client, url="https://example.com")
    up = created["checks"]["uptime"]["id"]
    for body, field in [
        ({"interval": 31}, "interval"),
        ({"interval": "60"}, "interval"),
        ({"interval": False}, "interval"),
        ({"notification_threshold": 3600}, "notification_threshold"),
        ({"interval": 60, "notification_threshold": 1}, "notification_threshold"),
        ({"expiry_threshold_days": 10}, "expiry_threshold_days"),
    ]:
        await expect_422(client, "PUT", f"/webapi/checks/{up}", field, json=body)
    await expect_422(client, "PUT", f"/webapi/checks/{up}", "body", data=b"[]")
    async with store.pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT interval_s, notification_threshold_s, config_version FROM checks WHERE id=$1",
            up)
    assert tuple(row) == (30, 0, 1)


async def raw_exchange(api: str, request: bytes) -> bytes:
    """Send raw bytes; return the status line, headers and body of the answer."""
    host, port = urlsplit(api).hostname, urlsplit(api).port
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        match = re.search(rb"(?i)content-length: *(\d+)", head)
        body = await asyncio.wait_for(reader.readexactly(int(match.group(1))), 5) if match else b""
        return head + body
    finally:
        writer.close()


async def test_broken_framing_of_the_body_is_a_4xx_not_a_500(
    api: str, account: tuple[Any, str], store: Store, caplog: pytest.LogCaptureFixture,
) -> None:
    _, token = account
    head = (f"POST /webapi/monitors HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\n")
    cases = [
        head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        head + "Content-Encoding: gzip\r\nContent-Length: 12\r\n\r\nnot gzip at!",
        head + "Content-Encoding: br\r\nContent-Length: 4\r\n\r\n{}{}",
    ]
    for raw in cases:
        answer = await raw_exchange(api, raw.encode())
        status = answer.split(b"\r\n", 1)[0]
        assert re.match(rb"HTTP/1\.[01] 4\d\d", status), (raw, answer[:300])
    assert (await counts(store))["monitors"] == 0
    assert "Server error" not in caplog.text and "unhandled error" not in caplog.text
