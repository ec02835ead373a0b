"""SIGKILL at any moment loses no event, applies no transition twice and never gives an
event a second id: shown on real ``upwatch run`` processes against real targets."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import aiohttp
import orjson

from engine.db.store import Store
from tests.support.instances import Instance, RegionalTarget, WebhookReceiver, fetch
from tests.support.wait import wait_until

FAST = {
    "UPWATCH_TIME_SCALE": "0.01",  # 30 s interval -> 0.3 s; webhook back-off 10 s -> 0.1 s
    "UPWATCH_RESULT_FLUSH_INTERVAL": "0.05",
    "UPWATCH_PROBE_TIMEOUT": "1",
    "UPWATCH_HEARTBEAT_INTERVAL": "0.5",
}


async def _monitor(inst: Instance, token: str, url: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(f"{inst.base_url}/webapi/monitors", json={"url": url}) as r:
            assert r.status == 201, await r.text()
            body = await r.json()
    # Only the uptime check runs: a plain-HTTP site's certificate check is created paused.
    assert body["checks"]["certificate_health"]["is_enabled"] is False
    return int(body["checks"]["uptime"]["id"])


async def test_events_pending_at_sigkill_are_delivered_after_restart_with_their_ids(
    db_dsn: str, tmp_path: Path, store: Store
) -> None:
    async with RegionalTarget() as target, WebhookReceiver() as receiver:
        receiver.status = 500
        _, token = await store.create_account("acme", webhook_url=receiver.url)
        inst = Instance(db_dsn, tmp_path, env=FAST)
        await inst.start()
        try:
            check_id = await _monitor(inst, token, target.url("/"))
            target.failing_for = {"127.0.0.1"}
            await wait_until(lambda: _has_tries(receiver, 2), timeout=20, what="two failed tries")
            await inst.kill()
            first_id = receiver.hits[0].headers["X-Service-Webhook"]
            tries_before = len(receiver.hits)
            receiver.status = 200
            inst2 = Instance(db_dsn, tmp_path, env=FAST, port=inst.port)
            await inst2.start()
            try:
                await wait_until(lambda: _delivered(db_dsn),
                                 timeout=20, what="the delivery after restart")
            finally:
                await inst2.stop()
        finally:
            await inst.kill()
        ok_hits = [h for h in receiver.hits[tries_before:]]
        assert ok_hits[-1].headers["X-Service-Webhook"] == first_id
        assert int(ok_hits[-1].headers["X-Service-Current-Try"]) > tries_before
        events = await fetch(db_dsn, "SELECT id, event, status FROM webhook_events "
                                     "WHERE check_id = $1", check_id)
        assert [(str(e["id"]), e["event"]) for e in events] == [(first_id, "downtime")]


async def _has_tries(receiver: WebhookReceiver, n: int) -> bool:
    return len(receiver.hits) >= n


async def _delivered(dsn: str) -> bool:
    rows = await fetch(dsn, "SELECT count(*) AS n FROM webhook_events WHERE status='delivered'")
    return int(rows[0]["n"]) >= 1


async def test_repeated_sigkill_during_flapping_keeps_every_incident_exactly_once(
    db_dsn: str, tmp_path: Path, store: Store
) -> None:
    """A site flaps while the instance is killed at random moments (mid-probe, mid-batch,
    mid-transition, mid-delivery). Afterwards the event log is exactly the alternation
    downtime, restored, downtime, ... with each restored pointing at its own downtime, every
    alerted outage has exactly one downtime event, and the receiver never saw an id twice
    with different bodies."""
    rng = random.Random(20261122)
    async with RegionalTarget() as target, WebhookReceiver() as receiver:
        _, token = await store.create_account("acme", webhook_url=receiver.url)
        inst = Instance(db_dsn, tmp_path, env=FAST)
        await inst.start()
        check_id = await _monitor(inst, token, target.url("/flap"))
        port = inst.port
        deadline = time.monotonic() + 40
        kills = 0
        try:
            while kills < 5 and time.monotonic() < deadline:
                # Let a few transitions happen, then kill without warning.
                for _ in range(3):
                    target.failing_for = {"127.0.0.1"} if not target.failing_for else set()
                    await asyncio.sleep(rng.uniform(0.4, 1.2))
                await inst.kill()
                kills += 1
                inst = Instance(db_dsn, tmp_path, env=FAST, port=port)
                await inst.start()
            target.failing_for = set()

            async def settled() -> bool:
                rows = await fetch(db_dsn, "SELECT status FROM checks WHERE id = $1", check_id)
                pending = await fetch(db_dsn, "SELECT count(*) AS n FROM webhook_events "
                                              "WHERE status = 'pending'")
                return rows[0]["status"] == "ok" and pending[0]["n"] == 0

            await wait_until(settled, timeout=30, what="the check ok and every event delivered")
        finally:
            await inst.kill()
    assert kills >= 3
    events = await fetch(db_dsn, "SELECT id, event, parent_id, status FROM webhook_events "
                                 "WHERE check_id = $1 ORDER BY id", check_id)
    assert events, "the flapping should have produced incidents"
    kinds = [e["event"] for e in events]
    # Strict alternation, starting with a downtime and ending restored (the site is up).
    assert kinds == ["downtime", "uptime_restored"] * (len(kinds) // 2), kinds
    for down, up in zip(events[::2], events[1::2], strict=True):
        assert up["parent_id"] == down["id"]
    assert all(e["status"] == "delivered" for e in events)
    alerted = await fetch(db_dsn, "SELECT count(*) AS n FROM outages WHERE check_id = $1 "
                                  "AND alerted", check_id)
    assert alerted[0]["n"] == len(kinds) // 2
    open_outages = await fetch(db_dsn, "SELECT count(*) AS n FROM outages WHERE check_id = $1 "
                                       "AND ended_at IS NULL", check_id)
    assert open_outages[0]["n"] == 0
    # The receiver may see a try twice (a kill between its 200 and our record of it), but
    # an id always comes with the same bytes, and every event id reached it.
    bodies: dict[str, bytes] = {}
    for hit in receiver.hits:
        wid = hit.headers["X-Service-Webhook"]
        assert bodies.setdefault(wid, hit.body) == hit.body
    assert set(bodies) == {str(e["id"]) for e in events}
    assert {orjson.loads(b)["check"]["status"] for b in bodies.values()} == {"ok", "nok"}
