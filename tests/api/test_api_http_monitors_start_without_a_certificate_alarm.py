"""An http:// monitor, however it is created (POST /webapi/monitors, the PingPing mount, the
bulk PUT of monitors as code), starts with its certificate check paused: on a real
``upwatch run`` its uptime check probes while the certificate check never does, no webhook is
queued or sent, and the status page shows no certificate at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from engine.db.store import Store
from tests.support.instances import Instance, RegionalTarget, WebhookReceiver, fetch
from tests.support.wait import wait_until

FAST = {
    "UPWATCH_TIME_SCALE": "0.01",  # a 30 s interval is 0.3 s
    "UPWATCH_RESULT_FLUSH_INTERVAL": "0.05",
    "UPWATCH_PROBE_TIMEOUT": "1",
    "UPWATCH_HEARTBEAT_INTERVAL": "0.5",
}
UPTIME_PROBES = 5  # a new certificate check would have been probed at once, long before


async def _json(resp: aiohttp.ClientResponse, status: int) -> Any:
    assert resp.status == status, await resp.text()
    return await resp.json()


async def _probes(dsn: str, check_ids: list[int]) -> dict[int, int]:
    rows = await fetch(dsn, "SELECT check_id, count(*) AS n FROM probe_results"
                            " WHERE check_id = ANY($1::bigint[]) GROUP BY check_id", check_ids)
    return {r["check_id"]: int(r["n"]) for r in rows}


async def test_http_monitors_created_every_way_probe_no_certificate_and_alert_nothing(
    db_dsn: str, tmp_path: Path, store: Store
) -> None:
    async with RegionalTarget() as target, WebhookReceiver() as receiver:
        _, token = await store.create_account("acme", webhook_url=receiver.url)
        inst = Instance(db_dsn, tmp_path, env=FAST)
        await inst.start()
        try:
            headers = {"Authorization": f"Bearer {token}"}
            async with aiohttp.ClientSession(base_url=inst.base_url, headers=headers) as http:
                async with http.post("/webapi/monitors", json={"url": target.url("/api")}) as r:
                    await _json(r, 201)
                async with http.post("/pingping/webapi/monitors",
                                     json={"url": target.url("/pingping")}) as r:
                    await _json(r, 200)
                doc = {"monitors": [{"key": "file", "url": target.url("/file")}]}
                async with http.put("/webapi/monitors", json=doc) as r:
                    assert len((await _json(r, 200))["created"]) == 1
                async with http.get("/webapi/monitors") as r:
                    monitors = await _json(r, 200)
                assert len(monitors) == 3
                for m in monitors:
                    cert = m["checks"]["certificate_health"]
                    assert (cert["is_enabled"], cert["status"]) == (False, "paused"), m["url"]
                    assert m["checks"]["uptime"]["is_enabled"] is True
                ups = [m["checks"]["uptime"]["id"] for m in monitors]
                certs = [m["checks"]["certificate_health"]["id"] for m in monitors]

                async def uptime_probed() -> bool:
                    counts = await _probes(db_dsn, ups)
                    return all(counts.get(c, 0) >= UPTIME_PROBES for c in ups)

                await wait_until(uptime_probed, timeout=30, what="every uptime check probed")
                assert await _probes(db_dsn, certs) == {}
                events = await fetch(db_dsn, "SELECT event FROM webhook_events")
                assert events == [] and receiver.hits == []
                for m in monitors:
                    async with http.get(f"/{m['identifier']}") as r:
                        assert r.status == 200
                        page = await r.text()
                    assert "Certificate problem" not in page
                    assert "TLS certificate" not in page and "Certificate expires" not in page
                    async with http.get(f"/{m['identifier']}.json") as r:
                        twin = await _json(r, 200)
                    assert twin["state"] == "operational"
                    assert twin["certificate"] == {"issuer": None, "valid_to": None}
                async with http.get("/webapi/monitors") as r:
                    after = await _json(r, 200)
                assert all(m["checks"]["certificate_health"]["status"] == "paused"
                           for m in after)
        finally:
            await inst.stop()
