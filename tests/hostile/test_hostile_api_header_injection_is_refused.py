"""Header and log injection through the strings the API stores and later sends: the alias
(webhook bodies, the status page) and the monitor and webhook URLs (the request line and
Host header of every probe and delivery). CR, LF, NUL, other control characters and the
Unicode line separators are a 422 under the field, on create and on update, and nothing is
stored. Percent-encoded line breaks stay encoded: inert in a request line."""

from __future__ import annotations

from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.db.store import Store
from engine.monitors import validation

TABLES = ("accounts", "monitors", "checks", "check_periods")

BREAKERS = {
    "CRLF": "\r\n",
    "CR": "\r",
    "LF": "\n",
    "NUL": "\x00",
    "NEL U+0085": "\x85",
    "LINE SEPARATOR U+2028": "\u2028",
    "PARAGRAPH SEPARATOR U+2029": "\u2029",
    "vertical tab": "\x0b",
    "form feed": "\x0c",
    "ESC": "\x1b",
    "DEL": "\x7f",
}


async def snapshot(pool: asyncpg.Pool) -> dict[str, list[asyncpg.Record]]:
    return {t: await pool.fetch(f"SELECT * FROM {t} ORDER BY 1") for t in TABLES}


async def assert_422(
    client: aiohttp.ClientSession, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    async with client.request(method, path, json=body) as r:
        assert r.status == 422, (method, path, body, r.status)
        got = await r.json()
    assert list(got["errors"]) == [field], got
    # The message names the rule; it does not echo the hostile value back.
    for text in got["errors"][field] + [got["message"]]:
        assert "Injected" not in text and "\r" not in text and "\n" not in text


@pytest.mark.parametrize("name", list(BREAKERS))
def test_every_line_breaker_is_refused_by_the_validators(name: str) -> None:
    ch = BREAKERS[name]
    with pytest.raises(validation.ValidationFailed):
        validation.validate_alias(f"shop{ch}X-Injected: 1")
    with pytest.raises(validation.ValidationFailed):
        validation.normalise_url(f"https://shop.example/{ch}X-Injected: 1")
    with pytest.raises(validation.ValidationFailed):
        validation.normalise_url(f"https://shop.example{ch}.evil/")


async def test_line_breakers_in_alias_and_urls_are_422_and_store_nothing(
    client: aiohttp.ClientSession, store: Store
) -> None:
    async with client.post("/webapi/monitors",
                           json={"url": "https://shop.example/", "alias": "Shop"}) as r:
        assert r.status == 201
        mid = (await r.json())["id"]
    before = await snapshot(store.pool)
    for ch in BREAKERS.values():
        alias = f"Shop{ch}X-Injected: 1"
        url = f"https://shop.example/{ch}X-Injected: 1"
        host_url = f"https://shop.example{ch}X-Injected:1/"
        await assert_422(client, "POST", "/webapi/monitors",
                         {"url": "https://ok.example/", "alias": alias}, "alias")
        await assert_422(client, "POST", "/webapi/monitors", {"url": url}, "url")
        await assert_422(client, "POST", "/webapi/monitors", {"url": host_url}, "url")
        await assert_422(client, "PUT", f"/webapi/monitors/{mid}", {"alias": alias}, "alias")
        await assert_422(client, "PUT", f"/webapi/monitors/{mid}", {"url": url}, "url")
        await assert_422(client, "PUT", "/webapi/account", {"webhook_url": url}, "webhook_url")
        await assert_422(client, "PUT", "/webapi/account", {"webhook_url": host_url},
                         "webhook_url")
        # A good field beside a bad one is not applied either.
        async with client.put(f"/webapi/monitors/{mid}",
                              json={"alias": "Renamed", "url": url}) as r:
            assert r.status == 422
    assert await snapshot(store.pool) == before


async def test_percent_encoded_line_breaks_stay_encoded(
    client: aiohttp.ClientSession, store: Store
) -> None:
    async with client.post(
        "/webapi/monitors", json={"url": "https://shop.example/a%0d%0aX-Injected:%201?q=%0a"}
    ) as r:
        assert r.status == 201
        body = await r.json()
    assert body["url"] == "https://shop.example/a%0d%0aX-Injected:%201?q=%0a"
    stored = await store.pool.fetchval("SELECT url FROM monitors WHERE id = $1", body["id"])
    assert "\r" not in stored and "\n" not in stored


async def test_quotes_and_markup_in_an_alias_are_data(client: aiohttp.ClientSession) -> None:
    # Not injection: stored verbatim and escaped by whatever shows them (JSON here).
    alias = "\"}, {\"x\": 1, '<script>alert(1)</script> \\u2028"
    async with client.post("/webapi/monitors",
                           json={"url": "https://shop.example/", "alias": alias}) as r:
        assert r.status == 201
        assert (await r.json())["alias"] == alias
