"""A database outage delays notifications but loses none and sends none twice: the engine
holds the transition while PostgreSQL is away, writes it (with its notification rows) when it
is back, and the notification runner, which kept retrying its claims, then sends each once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.db.store import Store
from tests.support.engine_support import (
    DbProxy,
    add_monitor,
    fast_settings,
    fetch,
    running_engine,
    wait_status,
)
from tests.support.notify_support import HttpReceiver, running_notifier
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until


async def test_a_transition_during_an_outage_is_notified_once_when_the_database_is_back(
    db_dsn: str, store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    proxy = await DbProxy(db_dsn).start()
    engine_store = await Store.connect(proxy.dsn, min_size=1, max_size=5)
    settings = fast_settings(tmp_path, resync_interval=0.5, notify_timeout=5.0)
    try:
        async with HttpTarget() as site, HttpReceiver() as receiver:
            _, check_id, _ = await add_monitor(store, acc.id, site.url("/"), alias="Shop")
            await store.create_channel(
                acc.id, name="hook", url=receiver.json_url("/hook"),
                events=["downtime", "uptime_restored"], monitor_ids=None, is_enabled=True,
            )
            async with running_engine(engine_store, settings), \
                    running_notifier(engine_store, settings):
                await wait_status(store, check_id, "ok")
                proxy.sever()
                seen = len(site.requests)
                site.status = 500

                async def probed_during_outage() -> bool:
                    return len(site.requests) >= seen + 5

                await wait_until(probed_during_outage, what="probes while the database is away")
                assert receiver.hits == []
                proxy.restore()
                await wait_status(store, check_id, "down", timeout=20)

                async def sent() -> bool:
                    rows = await fetch(store, "SELECT status FROM notification_events")
                    return bool(rows) and all(r["status"] == "delivered" for r in rows)

                await wait_until(sent, timeout=20, what="the notification delivered")
        assert [h.json()["title"] for h in receiver.hits] == ["DOWN: Shop"]
    finally:
        await engine_store.close()
        await proxy.stop()


async def test_a_notification_pending_when_the_database_goes_away_is_sent_once_after(
    db_dsn: str, store: Store, account: tuple[Any, str], tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    acc, _ = account
    proxy = await DbProxy(db_dsn).start()
    notify_store = await Store.connect(proxy.dsn, min_size=1, max_size=5)
    settings = fast_settings(tmp_path, resync_interval=0.5, notify_timeout=5.0)
    try:
        async with HttpTarget() as site, HttpReceiver(status=500) as receiver:
            _, check_id, _ = await add_monitor(store, acc.id, site.url("/"), alias="Shop")
            await store.create_channel(
                acc.id, name="hook", url=receiver.json_url("/hook"),
                events=["downtime"], monitor_ids=None, is_enabled=True,
            )
            async with running_engine(store, settings), running_notifier(notify_store, settings):
                await wait_status(store, check_id, "ok")
                site.status = 500
                await wait_status(store, check_id, "down")

                async def failed_twice() -> bool:
                    return len(receiver.hits) >= 2

                await wait_until(failed_twice, what="two failed tries")
                proxy.sever()
                receiver.status = 200

                async def outage_seen() -> bool:
                    return "notifications: database unavailable" in caplog.text

                await wait_until(outage_seen, what="the runner finding the database away")
                proxy.restore()

                async def sent() -> bool:
                    rows = await fetch(store, "SELECT status FROM notification_events")
                    return bool(rows) and all(r["status"] == "delivered" for r in rows)

                await wait_until(sent, timeout=20, what="the notification delivered")
        assert len(receiver.delivered()) == 1
    finally:
        await notify_store.close()
        await proxy.stop()
