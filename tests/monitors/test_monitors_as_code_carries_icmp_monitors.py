"""Monitors as code with icmp:// monitors: applied, exported with their count, interval and
assertions, applied again unchanged; a bad ping assertion named by its path."""

from __future__ import annotations

import tomllib
from typing import Any

import aiohttp
import pytest

from engine.probes.icmp import ping_access

pytestmark = pytest.mark.skipif(
    not ping_access().can_ping, reason=f"this node cannot ping: {ping_access().reason}")

ASSERTIONS = [{"source": "packet_loss", "comparison": "less_than", "target": 20},
              {"source": "rtt_avg", "comparison": "less_than", "target": 12.5}]
SET = {"monitors": [{"url": "icmp://127.0.0.2?interval_ms=100&count=4", "key": "router",
                     "alias": "Router", "assertions": ASSERTIONS}]}


async def put(client: aiohttp.ClientSession, doc: Any) -> tuple[int, Any]:
    async with client.put("/webapi/monitors", json=doc) as r:
        return r.status, await r.json()


async def test_an_icmp_monitor_goes_round_the_file(client: aiohttp.ClientSession) -> None:
    status, body = await put(client, SET)
    assert status == 200, body
    assert [c["url"] for c in body["created"]] == ["icmp://127.0.0.2?count=4&interval_ms=100"]
    async with client.get("/webapi/monitors/export") as r:
        assert r.status == 200
        exported = tomllib.loads(await r.text())
    [monitor] = exported["monitors"]
    assert monitor["url"] == "icmp://127.0.0.2?count=4&interval_ms=100"
    assert [(a["source"], a["comparison"], a["target"]) for a in monitor["assertions"]] == [
        ("packet_loss", "less_than", 20), ("rtt_avg", "less_than", 12.5)]
    assert "request" not in monitor
    status, body = await put(client, {"monitors": [monitor]})
    assert status == 200, body
    assert (body["created"], body["updated"], body["unchanged"]) == ([], [], 1)


async def test_a_bad_ping_assertion_in_a_file_is_named_by_its_path(
    client: aiohttp.ClientSession
) -> None:
    doc = {"monitors": [{"url": "icmp://127.0.0.2",
                         "assertions": [{"source": "jitter", "comparison": "matches",
                                         "target": "x"}]}]}
    status, body = await put(client, doc)
    assert status == 422, body
    [(field, words)] = body["errors"].items()
    assert field.endswith("assertions.0.comparison"), body
    assert "less_than, greater_than, equals, not_equals" in words[0]
