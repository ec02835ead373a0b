"""A monitor's ``request`` and ``assertions`` in monitors as code: export writes
them with secrets masked as the API shows them, apply creates and updates them by the API's
rules (a masked value keeps the stored secret), and an unchanged file writes nothing."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import aiohttp

from engine.db.store import Store
from engine.monitors import file as monitorfile
from engine.monitors import requests as requestconfig
from engine.runtime.settings import Settings
from tests.support.cli import upwatch
from tests.support.engine_support import fetch

REQUEST = {"method": "POST", "headers": {"Authorization": "Bearer abc",
                                         "X-Auth-Token": "t0k", "Accept": "text/html"},
           "body": "{\"q\": 1}", "follow_redirects": False}
ASSERTIONS = [{"source": "status_code", "comparison": "equals", "target": 200},
              {"source": "json", "property": "$.status", "comparison": "equals",
               "target": "UP"},
              {"source": "response_time", "comparison": "less_than", "target": 1500.5}]
SHOWN = {"method": "POST", "headers": {"Authorization": "********",
                                       "X-Auth-Token": "********", "Accept": "text/html"},
         "body": "{\"q\": 1}", "follow_redirects": False}


async def put(client: aiohttp.ClientSession, doc: Any) -> tuple[int, Any]:
    async with client.put("/webapi/monitors", json=doc) as r:
        return r.status, await r.json()


async def export(client: aiohttp.ClientSession) -> tuple[str, Any]:
    async with client.get("/webapi/monitors/export") as r:
        assert r.status == 200
        text = await r.text()
    async with client.get("/webapi/monitors/export", params={"format": "json"}) as r:
        doc = await r.json()
    assert tomllib.loads(text) == doc  # the TOML and JSON forms say the same
    return text, doc


async def stored(store: Store, account_id: int) -> list[Any]:
    return [tuple(r) for r in await fetch(
        store, "SELECT m.request::text, m.assertions::text, m.updated_at, u.config_version"
        " FROM monitors m JOIN checks u ON u.monitor_id = m.id AND u.kind = 'uptime'"
        " WHERE m.account_id = $1 ORDER BY m.id", account_id)]


async def plain(store: Store, settings: Settings, account_id: int) -> list[Any]:
    """The account's stored requests with their secrets decrypted."""
    box = requestconfig.secret_box(settings)
    return [requestconfig.plain_request(r["request"], box) for r in await fetch(
        store, "SELECT request FROM monitors WHERE account_id = $1 ORDER BY id", account_id)]


async def test_export_masks_secrets_and_apply_round_trips_them(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str], api: str,
    settings: Settings,
) -> None:
    async with client.post("/webapi/monitors", json={
            "url": "https://api.example/health", "request": REQUEST,
            "assertions": ASSERTIONS}) as r:
        assert r.status == 201
    async with client.post("/webapi/monitors", json={"url": "https://plain.example/"}) as r:
        assert r.status == 201
    text, doc = await export(client)
    assert "Bearer abc" not in text and "t0k" not in text
    first, second = doc["monitors"]
    assert first["request"] == SHOWN
    assert first["assertions"] == ASSERTIONS  # as the API shows them, less the nulls
    assert "request" not in second and "assertions" not in second  # seed's entries

    # The export applied back, secrets masked: nothing written, the secrets kept.
    before = await stored(store, account[0].id)
    status, body = await put(client, doc)
    assert status == 200 and body["unchanged"] == 2 and not body["updated"], body
    assert await stored(store, account[0].id) == before

    # A fresh account has no secret to keep: the masked values are refused by entry and
    # header, and nothing is created.
    _, token = await store.create_account("other")
    async with aiohttp.ClientSession(
            base_url=api, headers={"Authorization": f"Bearer {token}"}) as fresh:
        status, body = await put(fresh, doc)
        assert status == 422
        assert set(body["errors"]) == {"monitors[0].request.headers.Authorization",
                                       "monitors[0].request.headers.X-Auth-Token"}
        other_id = (await fetch(store, "SELECT id FROM accounts WHERE name = 'other'"))[0][0]
        assert await stored(store, other_id) == []
        # With the secrets filled in (as the operator who owns them would), the fresh
        # account gets the same monitors, secrets stored encrypted.
        filled = copy.deepcopy(doc)
        filled["monitors"][0]["request"]["headers"].update(
            {"Authorization": "Bearer abc", "X-Auth-Token": "t0k"})
        status, body = await put(fresh, filled)
        assert status == 200 and len(body["created"]) == 2, body
        assert (await export(fresh))[1] == doc
        assert await plain(store, settings, other_id) == await plain(
            store, settings, account[0].id)
        [row] = await fetch(store, "SELECT request::text FROM monitors WHERE account_id = $1"
                            " AND request IS NOT NULL", other_id)
        assert "Bearer abc" not in row[0] and "t0k" not in row[0]
        # The same plain secrets again: equal once decrypted, so nothing is written.
        before_other = await stored(store, other_id)
        status, body = await put(fresh, filled)
        assert body["unchanged"] == 2 and not body["updated"]
        assert await stored(store, other_id) == before_other

    # A change beside a masked secret: the request is replaced, the secret kept, the
    # engine told (config_version), and the plan names the field.
    changed = copy.deepcopy(doc)
    changed["monitors"][0]["request"]["method"] = "PUT"
    status, body = await put(client, changed)
    assert status == 200 and [u["changes"] for u in body["updated"]] == [["request"]]
    [after, _] = await plain(store, settings, account[0].id)
    assert after is not None and after["method"] == "PUT"
    assert dict(map(tuple, after["headers"])) == REQUEST["headers"]
    assert (await stored(store, account[0].id))[0][3] > before[0][3]

    # A file without them states a monitor without them: both go, the seed's shape returns.
    bare = {"monitors": [{k: v for k, v in m.items() if k not in ("request", "assertions")}
                         for m in doc["monitors"]]}
    status, body = await put(client, bare)
    assert [u["changes"] for u in body["updated"]] == [["request", "assertions"]]
    async with client.get("/webapi/monitors") as r:
        assert all("request" not in m and "assertions" not in m for m in await r.json())


async def test_a_bad_assertion_is_refused_with_its_entry_and_nothing_is_applied(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str],
) -> None:
    doc = {"monitors": [
        {"url": "https://a.example/", "assertions": ASSERTIONS},
        {"url": "https://b.example/", "request": {"method": "GET", "body": "x"},
         "assertions": [ASSERTIONS[0], {"source": "json", "property": "$[",
                                        "comparison": "equals", "target": "UP"},
                        {"source": "body", "comparison": "resembles", "target": "x"}]},
    ]}
    status, body = await put(client, doc)
    assert status == 422
    assert set(body["errors"]) == {"monitors[1].request.body",
                                   "monitors[1].assertions.1.property",
                                   "monitors[1].assertions.2.comparison"}
    assert "JSONPath" in body["errors"]["monitors[1].assertions.1.property"][0]
    assert await stored(store, account[0].id) == []


def test_toml_layout_and_error_lines_of_requests_and_assertions() -> None:
    doc = {"monitors": [{"url": "https://a.example/", "alias": "a",
                         "request": {**SHOWN, "headers": {**SHOWN["headers"], "X.Odd": "1"},
                                     "body": None},
                         "assertions": ASSERTIONS}]}
    text = monitorfile.render_toml(doc)
    read = tomllib.loads(text)["monitors"][0]
    assert read["request"]["headers"]["X.Odd"] == "1" and "body" not in read["request"]
    assert read["assertions"][2]["target"] == 1500.5
    lines = monitorfile.LineMap.of(text)
    numbered = text.splitlines()
    at = lines.line_of("monitors[0].assertions.1.property")
    assert at is not None and numbered[at - 1] == 'property = "$.status"'
    at = lines.line_of("monitors[0].request.headers.Authorization")
    assert at is not None and numbered[at - 1] == 'Authorization = "********"'
    at = lines.line_of("monitors[0].request.method")
    assert at is not None and numbered[at - 1] == 'method = "POST"'


BAD_TOML = """\
[[monitors]]
url = "https://a.example/"

[[monitors.assertions]]
source = "status_code"
comparison = "equals"
target = 200

[[monitors.assertions]]
source = "body"
comparison = "matches"
target = "(unclosed"
"""


async def test_cli_reports_a_bad_assertion_with_its_line(
    db_dsn: str, store: Store, tmp_path: Path,
) -> None:
    account, _ = await store.create_account("ops")
    path = tmp_path / "bad.toml"
    path.write_text(BAD_TOML)
    res = upwatch("apply", str(path), dsn=db_dsn,
                  env={"UPWATCH_ALLOW_PRIVATE_TARGETS": "true"})
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines()[0].startswith(
        f"{path}:12: monitors[0] (https://a.example/): assertions.1.target: Not a regular"
        " expression")
    assert await store.monitor_set(account.id) == []
