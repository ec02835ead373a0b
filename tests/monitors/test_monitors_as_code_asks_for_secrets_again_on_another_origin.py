"""Monitors as code moves a monitor to another origin only with its secrets given again:
an entry (matched by key) whose URL changes origin may not keep a secret header by sending
it masked; on the same origin it may."""

from __future__ import annotations

import aiohttp

from engine.db.store import Store
from engine.monitors import requests as requestconfig
from engine.runtime.settings import Settings
from tests.support.engine_support import fetch

SECRETS = {"X-Api-Key": "k-123", "Private-Token": "glpat-456", "X-Auth-Token": "t-789",
           "Authorization": "Bearer s3cret", "Cookie": "sid=abc"}
MASKED = dict.fromkeys(SECRETS, "********")
BODY = "user=ops&password=hunter2"


async def stored_secrets(store: Store, settings: Settings) -> tuple[str, dict[str, str]]:
    [row] = await fetch(store, "SELECT url, request FROM monitors")
    plain = requestconfig.plain_request(row["request"], requestconfig.secret_box(settings))
    assert plain is not None
    return row["url"], {str(h[0]): str(h[1]) for h in plain["headers"]}


async def test_monitors_as_code_refuses_masked_secrets_on_another_origin(
    client: aiohttp.ClientSession, store: Store, settings: Settings,
) -> None:
    entry = {"key": "api", "url": "https://api.example/health",
             "request": {"method": "POST", "body": BODY, "headers": SECRETS}}
    async with client.put("/webapi/monitors", json={"monitors": [entry]}) as r:
        assert r.status == 200, await r.text()
    masked = {**entry, "request": {**entry["request"], "headers": MASKED}}
    moved = {**masked, "url": "https://elsewhere.example/health"}
    async with client.put("/webapi/monitors", json={"monitors": [moved]}) as r:
        assert r.status == 422
        answer = await r.json()
    errors = answer["errors"]
    assert answer["message"] == "5 masked header values cannot keep a stored value."
    assert set(errors) == {f"monitors[0].request.headers.{name}" for name in SECRETS}
    assert await stored_secrets(store, settings) == ("https://api.example/health", SECRETS)
    given = {**moved, "request": {**entry["request"], "headers": {**MASKED, **{
        name: "again" for name in SECRETS}}}}
    async with client.put("/webapi/monitors", json={"monitors": [given]}) as r:
        assert r.status == 200, await r.text()
    again = dict.fromkeys(SECRETS, "again")
    assert await stored_secrets(store, settings) == ("https://elsewhere.example/health", again)
    # A new path on the same origin keeps masked secrets.
    path = {**masked, "url": "https://elsewhere.example/other"}
    async with client.put("/webapi/monitors", json={"monitors": [path]}) as r:
        assert r.status == 200, await r.text()
    assert await stored_secrets(store, settings) == ("https://elsewhere.example/other", again)

