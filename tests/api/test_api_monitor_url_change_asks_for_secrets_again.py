"""Moving a monitor to another origin (scheme, host or port) does not take its secrets
along: kept secret headers (left out, or sent back as "********") and a kept body are a 422
naming each field, through /webapi and the PingPing mount alike; given again they are
accepted, and only then does the new origin receive them. A new path on the same origin
keeps them, and monitors as code follows the same rule."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from engine.db.store import Store
from engine.runtime.settings import Settings
from tests.support.engine_support import fast_settings, running_engine
from tests.support.targets import HttpTarget

SECRETS = {"X-Api-Key": "k-123", "Private-Token": "glpat-456", "X-Auth-Token": "t-789",
           "Authorization": "Bearer s3cret", "Cookie": "sid=abc"}
MASKED = dict.fromkeys(SECRETS, "********")
FIELDS = {f"request.headers.{name}" for name in SECRETS}
BODY = "user=ops&password=hunter2"


@pytest.fixture
async def session(api: str) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=api) as s:
        yield s


@pytest.fixture(params=["/webapi", "/pingping/webapi?api_key="])
def via(request: Any, account: tuple[Any, str]) -> tuple[str, dict[str, str], dict[str, str]]:
    """(the mount, its query, its headers): a Bearer header, or the token in ?api_key=."""
    token = account[1]
    if request.param == "/webapi":
        return "/webapi", {}, {"Authorization": f"Bearer {token}"}
    return "/pingping/webapi", {"api_key": token}, {}


async def call(session: aiohttp.ClientSession, via: Any, method: str, path: str,
               body: Any = None) -> tuple[int, Any]:
    mount, params, headers = via
    async with session.request(method, mount + path, params=params, headers=headers,
                               json=body) as r:
        return r.status, orjson.loads(await r.read())


async def create(session: aiohttp.ClientSession, via: Any, url: str) -> dict[str, Any]:
    status, m = await call(session, via, "POST", "/monitors", {
        "url": url, "request": {"method": "POST", "body": BODY,
                                "headers": {**SECRETS, "X-Custom": "visible"}}})
    assert status in (200, 201), m  # PingPing's create answers 200
    return dict(m)


@pytest.mark.parametrize("new", ["http://other.example:8080/health",  # another host
                                 "http://old.example:8081/health",    # another port
                                 "https://old.example:8080/health"])  # another scheme
async def test_kept_secrets_are_refused_on_another_origin(
    session: aiohttp.ClientSession, via: Any, new: str,
) -> None:
    m = await create(session, via, "http://old.example:8080/health")
    # Left out: the stored secret headers and body would stay.
    status, answer = await call(session, via, "PUT", f"/monitors/{m['id']}", {"url": new})
    assert status == 422
    assert set(answer["errors"]) == FIELDS | {"request.body"}
    origin = new.rsplit("/", 1)[0]
    assert f"another origin ({origin})" in answer["errors"]["request.headers.X-Api-Key"][0]
    # Sent back masked, the body given: each masked secret is named, nothing else.
    status, answer = await call(session, via, "PUT", f"/monitors/{m['id']}", {
        "url": new, "request": {"method": "POST", "body": BODY,
                                "headers": {**MASKED, "X-Api-Key": "new-key",
                                            "X-Custom": "visible"}}})
    assert status == 422
    assert set(answer["errors"]) == FIELDS - {"request.headers.X-Api-Key"}
    status, shown = await call(session, via, "GET", f"/monitors/{m['id']}")
    assert status == 200 and shown["url"] == "http://old.example:8080/health"
    # Given again: accepted, shown masked as always.
    status, answer = await call(session, via, "PUT", f"/monitors/{m['id']}", {
        "url": new, "request": {"method": "POST", "body": BODY,
                                "headers": {**SECRETS, "X-Custom": "visible"}}})
    assert status == 200, answer
    status, shown = await call(session, via, "GET", f"/monitors/{m['id']}")
    assert shown["url"] == new
    assert shown["request"]["headers"] == {**MASKED, "X-Custom": "visible"}


async def test_a_new_path_on_the_same_origin_keeps_the_secrets(
    session: aiohttp.ClientSession, via: Any,
) -> None:
    m = await create(session, via, "http://old.example/health")
    status, answer = await call(session, via, "PUT", f"/monitors/{m['id']}",
                                {"url": "HTTP://OLD.example:80/other?x=1"})
    assert status == 200, answer
    status, answer = await call(session, via, "PUT", f"/monitors/{m['id']}", {
        "url": "http://old.example/third",
        "request": {"method": "POST", "body": BODY, "headers": MASKED}})
    assert status == 200, answer


async def test_removing_the_request_or_leaving_nothing_secret_moves_freely(
    session: aiohttp.ClientSession, via: Any,
) -> None:
    m = await create(session, via, "http://old.example/health")
    status, answer = await call(session, via, "PUT", f"/monitors/{m['id']}",
                                {"url": "http://new.example/", "request": None})
    assert status == 200, answer
    status, plain = await call(session, via, "POST", "/monitors", {
        "url": "http://a.example/", "request": {"headers": {"Accept": "text/html"}}})
    assert status in (200, 201)
    status, answer = await call(session, via, "PUT", f"/monitors/{plain['id']}",
                                {"url": "http://b.example/"})
    assert status == 200, answer


async def test_the_new_origin_gets_the_secrets_only_once_given_again(
    session: aiohttp.ClientSession, via: Any, store: Store, settings: Settings,
    tmp_path: Path,
) -> None:
    async with HttpTarget() as old, HttpTarget(host="127.0.0.2") as new:
        m = await create(session, via, old.url("/health"))
        async with running_engine(store, fast_settings(tmp_path)):
            await old.wait_for_requests(1)
            status, _ = await call(session, via, "PUT", f"/monitors/{m['id']}",
                                   {"url": new.url("/health")})
            assert status == 422
            status, _ = await call(session, via, "PUT", f"/monitors/{m['id']}", {
                "url": new.url("/health"),
                "request": {"method": "POST", "body": BODY, "headers": MASKED}})
            assert status == 422
            given = {name: value + "-2" for name, value in SECRETS.items()}
            status, answer = await call(session, via, "PUT", f"/monitors/{m['id']}", {
                "url": new.url("/health"),
                "request": {"method": "POST", "body": "fresh", "headers": given}})
            assert status == 200, answer
            [seen, *_] = await new.wait_for_requests(1)
        assert seen.method == "POST" and seen.body == b"fresh"
        assert {k: seen.headers[k.lower()] for k in given} == given
        for request in new.requests:  # the old values never reached it
            text = repr(request)
            assert not any(value in text.replace(value + "-2", "") for value in
                           SECRETS.values())
            assert b"hunter2" not in request.body
        assert all(r.headers["x-api-key"] == "k-123" for r in old.requests)
