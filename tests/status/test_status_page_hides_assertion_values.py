"""A monitor whose assertions fail on what a local target answers (a session cookie, a
token in a JSON body), probed by the real engine of a one-region install: the public
status page, its JSON and its badges say which assertion failed and what confirmed the
outage, and never show a value the target answered nor the assertion's target; the owner
reads the whole error in the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from engine.db.store import Store
from tests.support.engine_support import fast_settings, fetch, running_engine, wait_status
from tests.support.targets import HttpTarget

SECRET = "RESPONSE_SECRET-4be1d07"
EXPECTED = "expected-cookie-77"


async def _create(client: aiohttp.ClientSession, url: str, assertion: dict[str, Any]
                  ) -> dict[str, Any]:
    async with client.post("/webapi/monitors", json={
        "url": url, "alias": "Members area", "assertions": [assertion],
    }) as r:
        assert r.status == 201, await r.text()
        body: dict[str, Any] = await r.json()
        return body


async def _public(api: str, identifier: str) -> tuple[str, str, dict[str, Any], list[str]]:
    """The page, its JSON (text and parsed) and the three badges, as anyone reads them."""
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(f"{api}/{identifier}") as r:
            assert r.status == 200
            page = await r.text()
        async with anonymous.get(f"{api}/{identifier}.json") as r:
            assert r.status == 200
            raw = await r.text()
            body = await r.json()
        badges = []
        for kind in ("status", "uptime", "response"):
            async with anonymous.get(f"{api}/{identifier}/badge.svg?type={kind}") as r:
                assert r.status == 200
                badges.append(await r.text())
    return page, raw, body, badges


async def test_the_public_page_names_the_failed_assertion_never_the_value(
    api: str, client: aiohttp.ClientSession, store: Store, tmp_path: Path
) -> None:
    fast = fast_settings(tmp_path)  # one region: "local"
    async with HttpTarget() as site:
        site.headers = {"Content-Type": "application/json",
                        "Set-Cookie": f"session={SECRET}; HttpOnly"}
        site.body = f'{{"token": "{SECRET}", "status": "ok"}}'.encode()
        cookie = await _create(client, site.url("/cookie"), {
            "source": "header", "property": "Set-Cookie", "comparison": "equals",
            "target": EXPECTED})
        token = await _create(client, site.url("/token"), {
            "source": "json", "property": "$.token", "comparison": "is_empty"})
        async with running_engine(store, fast):
            for m in (cookie, token):
                await wait_status(store, m["checks"]["uptime"]["id"], "down")

    cases = (
        (cookie, "Response check failed: the Set-Cookie header did not have the expected value"),
        (token, "Response check failed: the JSON value at $.token was not empty"),
    )
    for monitor, words in cases:
        check_id = monitor["checks"]["uptime"]["id"]
        (outage,) = await fetch(store, "SELECT * FROM outages WHERE check_id = $1", check_id)
        assert (outage["detected_by"], outage["verified_via"]) == ("local", "local")
        assert SECRET in outage["error"]  # what the owner's records hold

        page, raw, body, badges = await _public(api, monitor["identifier"])
        for text in (page, raw, *badges):
            assert SECRET not in text and "session=" not in text
            assert EXPECTED not in text
        # The banner, the check's row and the outage's cause tell the story in words.
        assert "The site answers, but its response check has been failing since" in page
        assert words in page
        assert "HTTP 200" not in page  # the status it got is no cause
        assert "Confirmed by a second check from the same region, times in UTC" in page
        assert "two locations" not in page
        uptime = body["checks"]["uptime"]
        assert (uptime["reason"], uptime["error"]) == ("assertion_failed", words)
        assert body["outages"][0]["reason"] == "assertion_failed"
        assert body["outages"][0]["cause"] == words
        assert body["outages"][0]["confirmed_by"] == "same_region"
        assert "status: down" in badges[0]

        # The owner reads the whole error, value included.
        async with client.get(f"/webapi/monitors/{monitor['id']}") as r:
            assert r.status == 200
            owned = await r.json()
        assert SECRET in owned["checks"]["uptime"]["error"]
