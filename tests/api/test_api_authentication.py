"""Bearer authentication on /webapi/*: 401 with WWW-Authenticate, never a token from the URL."""

from __future__ import annotations

from typing import Any

import aiohttp

PROTECTED = [
    ("GET", "/webapi/monitors"), ("POST", "/webapi/monitors"), ("GET", "/webapi/monitors/1"),
    ("PUT", "/webapi/monitors/1"), ("DELETE", "/webapi/monitors/1"),
    ("GET", "/webapi/monitors/1/statistics"), ("PUT", "/webapi/checks/1"),
    ("POST", "/webapi/checks/1/enable"), ("POST", "/webapi/checks/1/disable"),
    ("GET", "/webapi/account"), ("PUT", "/webapi/account"), ("GET", "/webapi/nothing"),
    ("GET", "/webapi/monitors/abc"), ("GET", "/webapi"),
]


async def assert_401(session: aiohttp.ClientSession, method: str, path: str, **kw: Any) -> None:
    async with session.request(method, path, **kw) as r:
        assert r.status == 401, (method, path, r.status)
        assert r.headers["WWW-Authenticate"] == "Bearer"
        assert r.headers["Content-Type"] == "application/json"
        assert await r.json() == {"message": "Unauthenticated."}


async def test_every_api_endpoint_needs_a_token(api: str) -> None:
    async with aiohttp.ClientSession(base_url=api) as s:
        for method, path in PROTECTED:
            await assert_401(s, method, path, json={"url": "https://example.com"})


async def test_wrong_tokens_and_schemes_are_refused(api: str, account: tuple[Any, str]) -> None:
    _, token = account
    bad_headers = [
        "Bearer", "Bearer ", f"Basic {token}", f"Token {token}", token, f"Bearer {token}x",
        f"Bearer {token[:-1]}", "Bearer uw_" + "A" * 43, "Bearer " + "x" * 5000,
        f"Bearer {token} extra",
    ]
    async with aiohttp.ClientSession(base_url=api) as s:
        for header in bad_headers:
            await assert_401(s, "GET", "/webapi/monitors", headers={"Authorization": header})


async def test_the_scheme_is_case_insensitive(api: str, account: tuple[Any, str]) -> None:
    _, token = account
    async with aiohttp.ClientSession(base_url=api) as s:
        for scheme in ("Bearer", "bearer", "BEARER"):
            async with s.get("/webapi/monitors",
                             headers={"Authorization": f"{scheme} {token}"}) as r:
                assert r.status == 200


async def test_a_token_in_the_query_string_is_refused(
    api: str, account: tuple[Any, str], client: aiohttp.ClientSession,
) -> None:
    _, token = account
    async with aiohttp.ClientSession(base_url=api) as s:
        for name in ("api_token", "token", "access_token"):
            await assert_401(s, "GET", f"/webapi/monitors?{name}={token}")
    # Even next to a valid header: the client must not put tokens in URLs at all.
    await assert_401(client, "GET", f"/webapi/monitors?api_token={token}")
    async with client.get("/webapi/monitors?page=1") as r:  # other parameters are fine
        assert r.status == 200


async def test_public_endpoints_need_no_token(api: str) -> None:
    async with aiohttp.ClientSession(base_url=api) as s:
        for path in ("/webapi/openapi.json", "/healthz", "/metrics"):
            async with s.get(path) as r:
                assert r.status == 200, path


async def test_the_account_is_the_tokens_owner(
    client: aiohttp.ClientSession, account: tuple[Any, str],
) -> None:
    acc, _ = account
    async with client.get("/webapi/account") as r:
        assert r.status == 200
        assert (await r.json())["id"] == acc.id
