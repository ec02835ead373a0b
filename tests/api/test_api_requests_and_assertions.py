"""``request`` and ``assertions`` through the API: 422s naming the field path with
nothing created or changed, the update rules, masking, and unchanged shapes for monitors
that set neither."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from tests.support.engine_support import fetch

GOOD_REQUEST = {"method": "POST", "headers": {"Authorization": "Bearer abc",
                                              "X-Auth-Token": "t0k", "Accept": "text/html"},
                "body": "{}", "follow_redirects": False}
GOOD_ASSERTIONS = [{"source": "status_code", "comparison": "equals", "target": 200},
                   {"source": "json", "property": "$.status", "comparison": "equals",
                    "target": "UP"}]


async def create(client: aiohttp.ClientSession, **body: Any) -> tuple[int, dict[str, Any]]:
    async with client.post("/webapi/monitors", json=body) as r:
        return r.status, await r.json()


async def update(client: aiohttp.ClientSession, mid: int, **body: Any) -> tuple[int, Any]:
    async with client.put(f"/webapi/monitors/{mid}", json=body) as r:
        return r.status, await r.json()


async def get(client: aiohttp.ClientSession, mid: int) -> dict[str, Any]:
    async with client.get(f"/webapi/monitors/{mid}") as r:
        assert r.status == 200
        data: dict[str, Any] = await r.json()
        return data


BAD: list[tuple[dict[str, Any], str]] = [
    ({"request": {"method": "BREW"}}, "request.method"),
    ({"request": "GET"}, "request"),
    ({"request": {"headers": {"X-A": "1\r\nX-Injected: 1"}}}, "request.headers.X-A"),
    ({"request": {"headers": {"X-A": "a\nb"}}}, "request.headers.X-A"),
    ({"request": {"headers": {"X-A": "a\u0000b"}}}, "request.headers.X-A"),
    ({"request": {"headers": {"Bad Name": "x"}}}, "request.headers"),
    ({"request": {"headers": {"Host": "evil.example"}}}, "request.headers"),
    ({"request": {"headers": {"content-length": "5"}}}, "request.headers"),
    ({"request": {"headers": {"Transfer-Encoding": "chunked"}}}, "request.headers"),
    ({"request": {"headers": {"Connection": "keep-alive"}}}, "request.headers"),
    ({"request": {"headers": {f"X-{i}": "v" for i in range(21)}}}, "request.headers"),
    ({"request": {"headers": {"X-A": 5}}}, "request.headers.X-A"),
    ({"request": {"method": "GET", "body": "x"}}, "request.body"),
    ({"request": {"method": "HEAD", "body": "x"}}, "request.body"),
    ({"request": {"method": "POST", "body": "\u00e9" * 8193}}, "request.body"),
    ({"request": {"follow_redirects": "yes"}}, "request.follow_redirects"),
    ({"assertions": [{"source": "cookie", "comparison": "equals", "target": "x"}]},
     "assertions.0.source"),
    ({"assertions": [GOOD_ASSERTIONS[0], {"source": "body", "comparison": "resembles",
                                          "target": "x"}]}, "assertions.1.comparison"),
    ({"assertions": [GOOD_ASSERTIONS[0], GOOD_ASSERTIONS[1],
                     {"source": "json", "property": "$.[", "comparison": "equals",
                      "target": "x"}]}, "assertions.2.property"),
    ({"assertions": [{"source": "json", "property": "status", "comparison": "equals",
                      "target": "x"}]}, "assertions.0.property"),
    ({"assertions": [{"source": "header", "comparison": "equals", "target": "x"}]},
     "assertions.0.property"),
    ({"assertions": [{"source": "body", "comparison": "matches", "target": "(a"}]},
     "assertions.0.target"),
    ({"assertions": [{"source": "body", "comparison": "matches", "target": "(?<=a)b"}]},
     "assertions.0.target"),
    ({"assertions": [{"source": "json", "property": "$.n", "comparison": "less_than",
                      "target": "ten"}]}, "assertions.0.target"),
    ({"assertions": [{"source": "response_time", "comparison": "less_than",
                      "target": "fast"}]}, "assertions.0.target"),
    ({"assertions": [{"source": "status_code", "comparison": "equals", "target": 42}]},
     "assertions.0.target"),
    ({"assertions": [{"source": "body", "comparison": "contains"}]}, "assertions.0.target"),
    ({"assertions": [GOOD_ASSERTIONS[0]] * 21}, "assertions"),
    ({"assertions": "status == 200"}, "assertions"),
    ({"request": {"method": "HEAD"},
      "assertions": [{"source": "body", "comparison": "contains", "target": "x"}]},
     "assertions.0.source"),
]


@pytest.mark.parametrize(("body", "field"), BAD, ids=[f for _, f in BAD])
async def test_bad_input_is_a_422_naming_the_field_and_nothing_changes(
    client: aiohttp.ClientSession, store: Store, body: dict[str, Any], field: str
) -> None:
    status, answer = await create(client, url="https://example.com/", **body)
    assert status == 422, answer
    assert field in answer["errors"], answer
    assert await fetch(store, "SELECT id FROM monitors") == []
    status, created = await create(client, url="https://example.com/",
                                   request=GOOD_REQUEST, assertions=GOOD_ASSERTIONS)
    assert status == 201, created
    before = await fetch(store, "SELECT * FROM monitors")
    status, answer = await update(client, created["id"], alias="New", **body)
    assert status == 422, answer
    assert field in answer["errors"]
    assert await fetch(store, "SELECT * FROM monitors") == before


async def test_a_monitor_without_them_keeps_the_seed_shapes(
    client: aiohttp.ClientSession,
) -> None:
    status, created = await create(client, url="https://example.com/")
    assert status == 201 and "request" not in created and "assertions" not in created
    full = await get(client, created["id"])
    assert "request" not in full and "assertions" not in full
    async with client.get("/webapi/monitors") as r:
        [listed] = await r.json()
    assert "request" not in listed and "assertions" not in listed


async def test_secrets_are_masked_and_encrypted_and_updates_follow_the_rules(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    status, created = await create(client, url="https://example.com/",
                                   request=GOOD_REQUEST, assertions=GOOD_ASSERTIONS)
    assert status == 201
    mid = created["id"]
    shown = {"method": "POST", "headers": {"Authorization": "********",
                                           "X-Auth-Token": "********", "Accept": "text/html"},
             "body": "{}", "follow_redirects": False}
    assert created["request"] == shown
    full = await get(client, mid)
    assert full["request"] == shown
    assert full["assertions"] == [
        {"source": "status_code", "property": None, "comparison": "equals", "target": 200},
        {"source": "json", "property": "$.status", "comparison": "equals", "target": "UP"}]
    [row] = await fetch(store, "SELECT request::text AS r FROM monitors")
    assert "Bearer abc" not in row["r"] and "t0k" not in row["r"]
    [row_before] = await fetch(store, "SELECT request FROM monitors")

    # "********" keeps the stored value (any case); a new value replaces it; others go.
    status, answer = await update(client, mid, request={
        "method": "PUT", "body": "x",
        "headers": {"authorization": "********", "X-Auth-Token": "new"}})
    assert status == 200, answer
    [row_after] = await fetch(store, "SELECT request FROM monitors")
    old = {h[0].lower(): h[1] for h in row_before["request"]["headers"]}
    new = {h[0].lower(): h[1] for h in row_after["request"]["headers"]}
    assert new["authorization"] == old["authorization"]
    assert new["x-auth-token"] != old["x-auth-token"] and "new" not in new["x-auth-token"]
    assert set(new) == {"authorization", "x-auth-token"}
    full = await get(client, mid)
    assert full["request"]["method"] == "PUT"
    assert full["assertions"] is not None  # left out: kept

    # "********" for a header that is not stored: 422, nothing changed.
    status, answer = await update(client, mid, request={"headers": {"Cookie": "********"}})
    assert status == 422 and "request.headers.Cookie" in answer["errors"]
    assert (await get(client, mid))["request"]["method"] == "PUT"

    # null removes the request; [] removes the assertions; then the seed shapes are back.
    status, _ = await update(client, mid, request=None)
    assert status == 200
    full = await get(client, mid)
    assert full["request"] is None and full["assertions"] is not None
    status, _ = await update(client, mid, assertions=[])
    assert status == 200
    full = await get(client, mid)
    assert "request" not in full and "assertions" not in full


async def test_a_change_of_request_makes_the_engine_reload(
    client: aiohttp.ClientSession, store: Store,
) -> None:
    status, created = await create(client, url="https://example.com/")
    cid = created["checks"]["uptime"]["id"]
    [before] = await fetch(store, "SELECT config_version FROM checks WHERE id = $1", cid)
    status, _ = await update(client, created["id"], assertions=GOOD_ASSERTIONS)
    assert status == 200
    [after] = await fetch(store, "SELECT config_version FROM checks WHERE id = $1", cid)
    assert after["config_version"] > before["config_version"]
