"""Attackers with wrong, missing, malformed, smuggled or misplaced credentials: always the
401 of decisions.md (``{"message": "Unauthenticated."}`` and ``WWW-Authenticate: Bearer``),
never a 400 from the HTTP parser, a 500, or an account's data, and nothing written.

Header bytes that client libraries would refuse to send go over a raw socket.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest

from engine.db.store import Store

UNAUTHENTICATED = {"message": "Unauthenticated."}


async def raw_request(
    api: str, head: bytes, body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    """Send ``head`` (request line and headers, no blank line) and ``body``; the answer."""
    host, port = api.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head + b"Connection: close\r\n\r\n" + body)
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head_bytes, _, payload = response.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, payload


def get_with(*authorization: bytes, path: bytes = b"/webapi/monitors") -> bytes:
    head = b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n"
    for value in authorization:
        head += b"Authorization: " + value + b"\r\n"
    return head


def assert_401(status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == 401, (status, body[:200])
    assert headers["www-authenticate"] == "Bearer"
    assert headers["content-type"].startswith("application/json")
    assert orjson.loads(body) == UNAUTHENTICATED


async def test_the_valid_token_works_over_the_raw_socket(
    api: str, account: tuple[Any, str]
) -> None:
    # The control for everything below: the same request with the right header is a 200.
    _, token = account
    status, _, body = await raw_request(api, get_with(b"Bearer " + token.encode()))
    assert status == 200 and body == b"[]"


@pytest.mark.parametrize(
    "value",
    [
        b"Bearer",
        b"Bearer ",
        b"Bearer  x",
        b"bearer x",
        b"BEARER x",
        b"Bearer\tx",
        b"Basic dXNlcjpwYXNz",
        b"Bearer null",
        b"Bearer undefined",
        b"Bearer ' OR 1=1 --",
        b"Bearer %00",
        b"Bearer " + b"A" * 10 * 1024,  # a 10 KiB token
        b"Bearer \xff\xfe\xc3\x28",  # not UTF-8
        b"Bearer \xe2\x80\xa8x",  # U+2028 in UTF-8
        b"Bearer caf\xc3\xa9",
        b"x" * 12 * 1024,
    ],
    ids=lambda v: repr(v[:24]),
)
async def test_malformed_and_wrong_tokens_are_401(api: str, value: bytes) -> None:
    assert_401(*await raw_request(api, get_with(value)))


async def test_the_valid_token_with_junk_appended_or_prepended_is_401(
    api: str, account: tuple[Any, str]
) -> None:
    token = account[1].encode()
    for value in (
        b"Bearer " + token + b"\xff",
        b"Bearer " + token + b"\xc3\xa9",
        b"Bearer " + token + b" " + token,
        b"Bearer " + token[:-1],
        b"Bearer " + token.upper(),
        b"Bearer\xc2\xa0" + token,  # a no-break space is not a separator
        b"Token " + token,
        token,
    ):
        assert_401(*await raw_request(api, get_with(value)))


async def test_two_authorization_headers_are_401_whichever_is_valid(
    api: str, account: tuple[Any, str]
) -> None:
    # A proxy in front may check one header and the app read the other: ambiguity is
    # refused, even when both are the same valid token.
    good = b"Bearer " + account[1].encode()
    for pair in ((good, b"Bearer nope"), (b"Bearer nope", good), (good, good)):
        assert_401(*await raw_request(api, get_with(*pair)))


async def test_a_missing_header_is_401_on_every_method(api: str) -> None:
    for method in (b"GET", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS", b"HEAD"):
        status, headers, body = await raw_request(
            api, method + b" /webapi/monitors/1 HTTP/1.1\r\nHost: x\r\n")
        assert status == 401, method
        assert headers["www-authenticate"] == "Bearer"
        if method != b"HEAD":
            assert orjson.loads(body) == UNAUTHENTICATED


@pytest.mark.parametrize(
    "query",
    ["api_token={t}", "token={t}", "access_token={t}", "API_KEY={t}", "apikey={t}",
     "key={t}", "Token={t}&page=1", "page=1&access_token={t}"],
)
async def test_a_token_in_the_query_string_is_refused_even_with_a_valid_header(
    api: str, account: tuple[Any, str], store: Store, query: str
) -> None:
    _, token = account
    q = query.format(t=token)
    async with aiohttp.ClientSession(base_url=api) as anonymous:
        async with anonymous.get(f"/webapi/monitors?{q}") as r:
            assert r.status == 401
            assert r.headers["WWW-Authenticate"] == "Bearer"
            assert await r.json() == UNAUTHENTICATED
        # With the right header too, and on a write: refused, and nothing created.
        async with anonymous.post(
            f"/webapi/monitors?{q}", json={"url": "https://example.com/"},
            headers={"Authorization": f"Bearer {token}"},
        ) as r:
            assert r.status == 401
            assert await r.json() == UNAUTHENTICATED
    assert await store.pool.fetchval("SELECT count(*) FROM monitors") == 0


async def test_refused_writes_store_nothing(api: str, store: Store) -> None:
    _, token = await store.create_account("victim")
    async with aiohttp.ClientSession(base_url=api) as s:
        for headers in ({}, {"Authorization": "Bearer nope"},
                        {"Authorization": f"Basic {token}"}):
            async with s.post("/webapi/monitors", json={"url": "https://x.example/"},
                              headers=headers) as r:
                assert r.status == 401
            async with s.put("/webapi/account", json={"webhook_url": "https://evil.example/"},
                             headers=headers) as r:
                assert r.status == 401
    assert await store.pool.fetchval("SELECT count(*) FROM monitors") == 0
    assert await store.pool.fetchval(
        "SELECT count(*) FROM accounts WHERE webhook_url IS NOT NULL") == 0


async def test_a_rotated_token_stops_working_at_once(
    api: str, account: tuple[Any, str], store: Store
) -> None:
    acc, old = account
    rotated = await store.rotate_token(acc.id)
    assert rotated is not None
    _, new = rotated
    assert_401(*await raw_request(api, get_with(b"Bearer " + old.encode())))
    status, _, _ = await raw_request(api, get_with(b"Bearer " + new.encode()))
    assert status == 200
