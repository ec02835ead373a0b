"""tcp/smtp monitors as code: created through the API with a body and assertions, exported
(JSON and TOML), applied back unchanged, and a file's bad tcp entry refused naming its
field."""

from __future__ import annotations

from typing import Any

import aiohttp

TCP = {"url": "tcp://db.example.com:6379", "alias": "Redis",
       "request": {"body": "PING\r\n"},
       "assertions": [{"source": "response", "comparison": "contains", "target": "+PONG"},
                      {"source": "connect_time", "comparison": "less_than", "target": 250}]}


async def _export(client: aiohttp.ClientSession, form: str) -> Any:
    async with client.get("/webapi/monitors/export", params={"format": form}) as r:
        assert r.status == 200, await r.text()
        return await (r.json() if form == "json" else r.text())


def _without_header(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


async def test_tcp_and_smtp_monitors_survive_export_and_apply(
    client: aiohttp.ClientSession,
) -> None:
    made = []
    for body in (TCP, {"url": "smtp://mail.example.com:25", "alias": "Mail"}):
        async with client.post("/webapi/monitors", json=body) as r:
            assert r.status == 201, await r.text()
            made.append(await r.json())
    # A tcp monitor has no certificate check (its host name gives it a domain check); a
    # mail server's starts enabled.
    assert set(made[0]["checks"]) == {"uptime", "domain_expiry"}
    assert made[1]["checks"]["certificate_health"]["is_enabled"] is True
    doc = await _export(client, "json")
    by_url = {m["url"]: m for m in doc["monitors"]}
    assert set(by_url) == {"tcp://db.example.com:6379", "smtp://mail.example.com"}
    tcp = by_url["tcp://db.example.com:6379"]
    assert tcp["request"]["body"] == "PING\r\n"
    assert [a["source"] for a in tcp["assertions"]] == ["response", "connect_time"]
    text = await _export(client, "toml")
    async with client.put("/webapi/monitors", json=doc) as r:
        applied = await r.json()
        assert r.status == 200, applied
    assert await _export(client, "json") == doc
    assert _without_header(await _export(client, "toml")) == _without_header(text)


async def test_a_bad_tcp_entry_is_refused_naming_its_field(
    client: aiohttp.ClientSession,
) -> None:
    doc = {"monitors": [{**TCP, "assertions": [
        {"source": "response", "comparison": "greater_than", "target": 3}]}]}
    async with client.put("/webapi/monitors", json=doc) as r:
        body = await r.json()
        assert r.status == 422, body
    assert any(k.endswith("assertions.0.comparison") for k in body["errors"]), body
