"""Monitors as code moves a monitor to another origin only with its secrets given again:
an entry (matched by key) whose URL changes origin may not keep a secret header by sending
it masked; on the same origin it may."""

from __future__ import annotations

import aiohttp

SECRETS = {"X-Api-Key": "k-123", "Private-Token": "glpat-456", "X-Auth-Token": "t-789",
           "Authorization": "Bearer s3cret", "Cookie": "sid=abc"}
MASKED = dict.fromkeys(SECRETS, "********")
BODY = "user=ops&password=hunter2"


async def test_monitors_as_code_refuses_masked_secrets_on_another_origin(
    client: aiohttp.ClientSession,
) -> None:
    entry = {"key": "api", "url": "https://api.example/health",
             "request": {"method": "POST", "body": BODY, "headers": SECRETS}}
    async with client.put("/webapi/monitors", json={"monitors": [entry]}) as r:
        assert r.status == 200, await r.text()
    masked = {**entry, "request": {**entry["request"], "headers": MASKED}}
    moved = {**masked, "url": "https://elsewhere.example/health"}
    async with client.put("/webapi/monitors", json={"monitors": [moved]}) as r:
        assert r.status == 422
        errors = (await r.json())["errors"]
    assert set(errors) == {f"monitors[0].request.headers.{name}" for name in SECRETS}
    given = {**moved, "request": {**entry["request"], "headers": {**MASKED, **{
        name: "again" for name in SECRETS}}}}
    async with client.put("/webapi/monitors", json={"monitors": [given]}) as r:
        assert r.status == 200, await r.text()
    # A new path on the same origin keeps masked secrets.
    path = {**masked, "url": "https://elsewhere.example/other"}
    async with client.put("/webapi/monitors", json={"monitors": [path]}) as r:
        assert r.status == 200, await r.text()

