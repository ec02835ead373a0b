"""A probe error naming the address a host resolved to: the public status page (HTML and
JSON, the check's last error and an outage's cause) shows its reason in words, without the
address (nor the rest of the owner's text); the monitor's owner reads the whole error in
the API."""

from __future__ import annotations

from typing import Any

import aiohttp

from engine.db.store import Store

V4 = "blocked: intranet.example resolves to a non-public address (10.1.2.3)"
V6 = "blocked: intranet.example resolves to a non-public address (fd00::1)"
PUBLIC = "The site's name points to a non-public address"


async def test_the_status_page_hides_the_address_the_owner_sees_it(
    api: str, client: aiohttp.ClientSession, store: Store
) -> None:
    async with client.post("/webapi/monitors", json={"url": "https://intranet.example/"}) as r:
        assert r.status == 201, await r.text()
        monitor: dict[str, Any] = await r.json()
    uptime_id = monitor["checks"]["uptime"]["id"]
    cert_id = monitor["checks"]["certificate_health"]["id"]
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE checks SET status = 'down', error = $2, "
                           "last_check_at = now() WHERE id = $1", uptime_id, V4)
        await conn.execute("UPDATE checks SET status = 'failing', error = $2, "
                           "last_check_at = now() WHERE id = $1", cert_id, V6)
        await conn.execute(
            """INSERT INTO outages (check_id, started_at, error, detected_by, verified_via,
                                    alerted)
               VALUES ($1, now() - interval '5 minutes', $2, 'local', 'local', true)""",
            uptime_id, V4)

    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(f"{api}/{monitor['identifier']}") as r:
            assert r.status == 200
            page = await r.text()
        async with anonymous.get(f"{api}/{monitor['identifier']}.json") as r:
            assert r.status == 200
            body = await r.json()
    for text in (page, str(body)):
        assert "10.1.2.3" not in text and "fd00::1" not in text
    assert PUBLIC.replace("'", "&#39;") in page
    assert body["checks"]["uptime"]["error"] == PUBLIC
    assert body["checks"]["uptime"]["reason"] == "private_address"
    assert body["checks"]["certificate_health"]["error"] == PUBLIC
    assert body["outages"][0]["cause"] == PUBLIC

    # The owner reads the whole error.
    async with client.get(f"/webapi/monitors/{monitor['id']}") as r:
        assert r.status == 200
        owned = await r.json()
    assert owned["checks"]["uptime"]["error"] == V4
    assert owned["checks"]["certificate_health"]["error"] == V6
