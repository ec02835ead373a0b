"""An attacker with an account of their own tries the victim's ids on every endpoint that
takes one: each answer is byte for byte the answer for an id that does not exist (status,
headers that matter, body), and the victim's rows are exactly as before."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import aiohttp
import asyncpg

from engine.db.store import Store
from engine.db.webhook_queue import insert_event
from engine.domain import payloads

TABLES = ("accounts", "monitors", "checks", "check_periods", "outages", "webhook_events")
MISSING = 987654321


async def snapshot(pool: asyncpg.Pool) -> dict[str, list[asyncpg.Record]]:
    return {t: await pool.fetch(f"SELECT * FROM {t} ORDER BY 1") for t in TABLES}


async def answer(
    session: aiohttp.ClientSession, method: str, path: str, body: Any
) -> tuple[int, str | None, bytes]:
    async with session.request(method, path, json=body) as r:
        return r.status, r.headers.get("Content-Type"), await r.read()


async def test_the_victims_ids_answer_like_missing_ones_everywhere(
    client: aiohttp.ClientSession, api: str, store: Store, account: tuple[Any, str]
) -> None:
    victim, _ = account
    async with client.post("/webapi/monitors",
                           json={"url": "https://victim.example/", "alias": "V"}) as r:
        assert r.status == 201
        monitor = await r.json()
    async with client.put("/webapi/account", json={"webhook_url": "https://hook.example/"}):
        pass
    mid = monitor["id"]
    cids = [monitor["checks"][k]["id"] for k in ("uptime", "certificate_health")]
    body = payloads.certificate_invalid(
        payloads.MonitorRef(mid, "https://victim.example/", "V"),
        last_check_at=datetime.now(UTC), error="certificate expired")
    async with store.pool.acquire() as conn, conn.transaction():
        event_id = await insert_event(
            conn, account_id=victim.id, monitor_id=mid, check_id=cids[1],
            event=payloads.CERTIFICATE_INVALID, body=body)
    await store.webhook_queue.mark_failed(event_id, 500, "HTTP 500")  # retryable by its owner

    attacker_account, attacker_token = await store.create_account("attacker")
    await store.set_webhook_url(attacker_account.id, "https://attacker.example/")
    before = await snapshot(store.pool)

    templates: list[tuple[str, str, Any]] = [
        ("GET", "/webapi/monitors/{}", None),
        ("PUT", "/webapi/monitors/{}", {"alias": "pwned", "url": "https://evil.example/"}),
        ("PUT", "/webapi/monitors/{}", {"alias": "pwned"}),
        ("PUT", "/webapi/monitors/{}", {}),
        ("DELETE", "/webapi/monitors/{}", None),
        ("GET", "/webapi/monitors/{}/statistics", None),
    ]
    targets = [(m, p.format(mid), p.format(MISSING), b) for m, p, b in templates]
    for cid in cids:
        for method, path, body_ in (
            ("PUT", "/webapi/checks/{}", {"interval": 60}),
            ("PUT", "/webapi/checks/{}", {"notification_threshold": 30}),
            ("PUT", "/webapi/checks/{}", {"expiry_threshold_days": 7}),
            ("PUT", "/webapi/checks/{}", {}),
            ("POST", "/webapi/checks/{}/disable", None),
            ("POST", "/webapi/checks/{}/enable", None),
        ):
            targets.append((method, path.format(cid), path.format(MISSING), body_))
    targets.append(("POST", f"/webapi/webhooks/{event_id}/retry",
                    f"/webapi/webhooks/{MISSING}/retry", None))

    async with aiohttp.ClientSession(
        base_url=api, headers={"Authorization": f"Bearer {attacker_token}"}
    ) as attacker:
        for method, theirs, missing, body_ in targets:
            got = await answer(attacker, method, theirs, body_)
            assert got[0] == 404, (method, theirs, got)
            assert got == await answer(attacker, method, missing, body_), (method, theirs)
        # Nor do lists or the delivery log show anything of the victim's.
        async with attacker.get("/webapi/monitors") as r:
            assert await r.json() == []
        async with attacker.get("/webapi/webhooks") as r:
            assert await r.json() == []
        async with attacker.get("/webapi/account") as r:
            assert (await r.json())["id"] == attacker_account.id

    assert await snapshot(store.pool) == before
    # And the victim still has everything, retry included.
    async with client.post(f"/webapi/webhooks/{event_id}/retry") as r:
        assert r.status == 200
    async with client.get(f"/webapi/monitors/{mid}") as r:
        assert r.status == 200 and (await r.json())["alias"] == "V"


async def test_the_status_page_is_public_but_read_only(
    client: aiohttp.ClientSession, api: str, store: Store
) -> None:
    async with client.post("/webapi/monitors", json={"url": "https://victim.example/"}) as r:
        identifier = (await r.json())["identifier"]
    before = await snapshot(store.pool)
    async with aiohttp.ClientSession(base_url=api) as anonymous:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            async with anonymous.request(method, f"/{identifier}", json={"alias": "x"}) as r:
                assert r.status == 405, method
            async with anonymous.request(method, f"/{identifier}.json") as r:
                assert r.status == 405, method
    assert await snapshot(store.pool) == before
