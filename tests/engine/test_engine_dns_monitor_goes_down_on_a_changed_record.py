"""A dns:// monitor end to end: created through the API, probed by the engine against a
real DNS server on loopback, down (confirmed) when the record it asserts on changes, up
again when it is back; its figures in the check's meta, and a status page that shows the
name asked, never the server's address or the records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from engine.db.store import Store
from tests.support.dns_zone_server import DnsZoneServer
from tests.support.engine_support import fast_settings, running_engine, wait_status


async def test_a_changed_record_takes_a_dns_monitor_down_and_back_up(
    store: Store, client: aiohttp.ClientSession, status_page_url: str, tmp_path: Path
) -> None:
    async with DnsZoneServer() as server:
        url = f"DNS://127.0.0.1:{server.port}/WWW.zone.test.?type=a"
        async with client.post("/webapi/monitors", json={
            "url": url, "alias": "www A",
            "assertions": [{"source": "answers", "comparison": "any_equals",
                            "target": "192.0.2.1"}],
        }) as r:
            assert r.status == 201, await r.text()
            created: dict[str, Any] = await r.json()
        assert created["url"] == f"dns://127.0.0.1:{server.port}/www.zone.test?type=A"
        assert list(created["checks"]) == ["uptime"]  # no certificate: no TLS in DNS
        assert created["checks"]["uptime"]["status"] == "pending"
        check_id = created["checks"]["uptime"]["id"]
        async with running_engine(store, fast_settings(tmp_path)):
            ok = await wait_status(store, check_id, "ok")
            meta = ok["meta"] if isinstance(ok["meta"], dict) else json.loads(ok["meta"])
            assert meta["rcode"] == "NOERROR"
            assert sorted(meta["answers"]) == ["192.0.2.1", "192.0.2.2"]
            assert meta["min_ttl"] == 120 and meta["type"] == "A"
            server.set("www", "A", ["192.0.2.7", "192.0.2.8"])
            down = await wait_status(store, check_id, "down")
            assert down["error"] in (
                'answers any_equals "192.0.2.1" failed: got "192.0.2.7", "192.0.2.8"',
                'answers any_equals "192.0.2.1" failed: got "192.0.2.8", "192.0.2.7"')
            assert down["outage_id"] is not None
            server.set("www", "A", ["192.0.2.1"])
            await wait_status(store, check_id, "ok")
        assert server.queries["udp"] >= 4  # probes and the confirmation of the failure

        async with client.get(f"/webapi/monitors/{created['id']}") as r:
            shown = await r.json()
        assert shown["checks"]["uptime"]["meta"]["rcode"] == "NOERROR"
        assert shown["checks"]["uptime"]["meta"]["answers"] == ["192.0.2.1"]

        async with aiohttp.ClientSession() as http, http.get(
                f"{status_page_url}/{created['identifier']}.json") as r:
            assert r.status == 200
            page = await r.json()
            text = await r.text()
        assert page["host"] == "www.zone.test"
        assert "127.0.0.1" not in text and "192.0.2." not in text


async def test_a_bad_dns_monitor_is_a_422_naming_the_field(
    client: aiohttp.ClientSession,
) -> None:
    cases = [
        ({"url": "dns://127.0.0.1/www.zone.test?type=ANY"}, "url"),
        ({"url": "dns://127.0.0.1/"}, "url"),
        ({"url": "dns://127.0.0.1/www.zone.test", "request": {"method": "GET"}}, "request"),
        ({"url": "dns://127.0.0.1/www.zone.test",
          "assertions": [{"source": "answers", "comparison": "equals", "target": "x"}]},
         "assertions.0.comparison"),
        ({"url": "dns://127.0.0.1/www.zone.test",
          "assertions": [{"source": "rcode", "comparison": "equals", "target": "NOPE"}]},
         "assertions.0.target"),
    ]
    for body, field in cases:
        async with client.post("/webapi/monitors", json=body) as r:
            assert r.status == 422, (body, await r.text())
            got = await r.json()
        assert field in str(got), (field, got)
