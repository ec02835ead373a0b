"""A pending notification survives ``kill -9`` of a real ``upwatch run`` process and is sent
once after the restart; the channel's secret never appears in the process's log."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from engine.db.store import Store
from tests.support.instances import Instance, RegionalTarget, fetch
from tests.support.notify_support import HttpReceiver
from tests.support.wait import wait_until

FAST = {
    "UPWATCH_TIME_SCALE": "0.01",
    "UPWATCH_RESULT_FLUSH_INTERVAL": "0.05",
    "UPWATCH_PROBE_TIMEOUT": "1",
    "UPWATCH_HEARTBEAT_INTERVAL": "0.5",
    "UPWATCH_NOTIFY_TIMEOUT": "5",
    "UPWATCH_LOG_LEVEL": "DEBUG",
}
SECRET = "kill9-secret-header-77"


async def test_a_notification_pending_at_sigkill_is_sent_once_after_restart(
    db_dsn: str, tmp_path: Path, store: Store
) -> None:
    async with RegionalTarget() as target, HttpReceiver(status=500) as receiver:
        _, token = await store.create_account("acme")
        headers = {"Authorization": f"Bearer {token}"}
        inst = Instance(db_dsn, tmp_path, env=FAST)
        await inst.start()
        logs = ""
        try:
            async with aiohttp.ClientSession(base_url=inst.base_url, headers=headers) as http:
                async with http.post("/webapi/monitors",
                                     json={"url": target.url("/"), "alias": "Shop"}) as r:
                    assert r.status == 201, await r.text()
                    cert = (await r.json())["checks"]["certificate_health"]["id"]
                async with http.post(f"/webapi/checks/{cert}/disable") as r:
                    assert r.status == 200
                url = receiver.json_url("/hook", **{"+X-Api-Key": SECRET})
                async with http.post("/webapi/notification-channels",
                                     json={"name": "hook", "url": url}) as r:
                    assert r.status == 201, await r.text()
                    assert SECRET not in await r.text()
            target.failing_for = {"127.0.0.1"}

            async def tried_twice() -> bool:
                return len(receiver.hits) >= 2

            await wait_until(tried_twice, timeout=20, what="two failed tries")
            await inst.kill()
            logs += inst.log_text()
            receiver.status = 200
            inst = Instance(db_dsn, tmp_path, env=FAST, port=inst.port)
            await inst.start()

            async def delivered() -> bool:
                rows = await fetch(db_dsn, "SELECT status FROM notification_events")
                return bool(rows) and all(r["status"] == "delivered" for r in rows)

            await wait_until(delivered, timeout=20, what="the notification delivered after restart")
        finally:
            await inst.kill()
            logs += inst.log_text()
    ok = receiver.delivered()
    assert len(ok) == 1 and ok[0].json()["title"] == "DOWN: Shop"
    rows = await fetch(db_dsn, "SELECT event, tries FROM notification_events")
    assert [r["event"] for r in rows] == ["downtime"] and rows[0]["tries"] >= 3
    assert "notification 1 of monitor" in logs  # the failed tries were logged...
    assert SECRET not in logs  # ...without the secret
