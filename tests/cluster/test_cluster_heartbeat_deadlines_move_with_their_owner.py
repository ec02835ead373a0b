"""Two real instances on one database: a ping to either node reaches the heartbeat's owner,
and when the owner is killed between a run's start and its max_runtime, the other node
holds the deadline and alerts, once."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from engine.db.store import Store
from tests.support.instances import Instance, WebhookReceiver, fetch, metric
from tests.support.wait import wait_until

SCALE = 0.02  # max_runtime 300 s is 6 s
SECRET = "test-cluster-secret"


def cluster_env() -> dict[str, str]:
    return {
        "UPWATCH_CLUSTER_SECRET": SECRET,
        "UPWATCH_TIME_SCALE": str(SCALE),
        "UPWATCH_HEARTBEAT_INTERVAL": "0.5",
        "UPWATCH_RESULT_FLUSH_INTERVAL": "0.1",
    }


@pytest.fixture
async def cluster(db_dsn: str, tmp_path: Path) -> AsyncIterator[dict[str, Instance]]:
    nodes = {r: Instance(db_dsn, tmp_path, region=r, env=cluster_env()) for r in ("eu", "us")}
    for inst in nodes.values():
        await inst.start()
    try:
        async def both_live() -> bool:
            async with aiohttp.ClientSession() as http:
                for inst in nodes.values():
                    if await metric(http, inst, "upwatch_live_nodes") != 2:
                        return False
            return True

        await wait_until(both_live, timeout=15, what="both nodes to see each other")
        yield nodes
    finally:
        for inst in nodes.values():
            await inst.kill()


async def judged_by(dsn: str, check_id: int) -> str:
    """The region of the node that judged the heartbeat last."""
    rows: list[Any] = []

    async def judged() -> bool:
        nonlocal rows
        rows = await fetch(dsn, "SELECT region FROM probe_results WHERE check_id = $1"
                                " ORDER BY at DESC LIMIT 1", check_id)
        return bool(rows)

    await wait_until(judged, timeout=20, what="a first judgment")
    return str(rows[0]["region"])


async def test_the_owner_dies_between_a_start_and_its_deadline_and_the_other_alerts_once(
    cluster: dict[str, Instance], store: Store, db_dsn: str,
) -> None:
    async with WebhookReceiver() as receiver:
        _, token = await store.create_account("acme", webhook_url=receiver.url)
        headers = {"Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.post(f"{cluster['eu'].base_url}/webapi/monitors", json={
                    "type": "heartbeat", "alias": "backup", "period": 86400, "grace": 3600,
                    "max_runtime": 300}) as r:
                assert r.status == 201, await r.text()
                monitor = await r.json()
        check_id = monitor["checks"]["heartbeat"]["id"]
        ping_id = monitor["ping_url"].rsplit("/", 1)[1]
        # The start goes to the us node; whichever node owns the check judges it.
        async with aiohttp.ClientSession() as anon:
            async with anon.get(f"{cluster['us'].base_url}/ping/{ping_id}/start") as r:
                assert r.status == 200
        owner = await judged_by(db_dsn, check_id)
        survivor = "us" if owner == "eu" else "eu"
        await cluster[owner].kill()

        async def down() -> Any:
            rows = await fetch(db_dsn, "SELECT status, error FROM checks WHERE id = $1",
                               check_id)
            return rows[0] if rows[0]["status"] == "down" else None

        row = await wait_until(down, timeout=30, what="the survivor to alert")
        assert "still running after" in row["error"]
        events = await fetch(db_dsn, "SELECT body FROM webhook_events WHERE check_id = $1",
                             check_id)
        assert len(events) == 1
        sent = orjson.loads(events[0]["body"])
        assert sent["check"]["name"] == "heartbeat"
        assert sent["check"]["meta"]["detected_by"] == survivor
        # Delivered to the account's receiver, signed with its token, once.
        await wait_until(lambda: bool(receiver.hits), timeout=20, what="the webhook")
        [hit] = receiver.hits
        assert orjson.loads(hit.body) == sent
        signature = hmac.new(token.encode(), hit.body, hashlib.sha1).hexdigest()
        assert hit.headers["X-Service-Signature"] == signature
