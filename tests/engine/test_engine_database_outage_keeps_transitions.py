"""State changes that happen while the database is away are kept, in order, and written
once it is back: an outage that starts and ends during a database outage is on record with
its real start and end and both webhooks (the restored one pointing at its downtime), and a
check that was down before recovers with the outage closed at the recovery, not at the
reconnection; a check disabled meanwhile (the API wins) gets none of its held changes
written. Shown on the real engine, with a TCP proxy that cuts the database."""

from __future__ import annotations

import time
from datetime import UTC
from pathlib import Path
from typing import Any

import orjson

from engine.db.store import Store
from engine.runtime.metrics import Metrics
from tests.support.engine_support import (
    DbProxy,
    add_monitor,
    disable_check,
    fast_settings,
    fetch,
    running_engine,
    wait_status,
)
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until


async def test_transitions_during_a_database_outage_are_written_after_it(
    store: Store, db_dsn: str, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    proxy = await DbProxy(db_dsn).start()
    engine_store = await Store.connect(proxy.dsn, min_size=1, max_size=5)
    settings = fast_settings(tmp_path, resync_interval=0.5)
    try:
        async with HttpTarget() as a_site, HttpTarget() as b_site, HttpTarget() as c_site:
            _, a, _ = await add_monitor(store, acc.id, a_site.url("/"))
            _, b, _ = await add_monitor(store, acc.id, b_site.url("/"))
            _, c, _ = await add_monitor(store, acc.id, c_site.url("/"))
            async with running_engine(engine_store, settings, metrics=Metrics()) as engine:
                await wait_status(store, a, "ok")
                b_site.status = 500  # b is down before the database goes away
                await wait_status(store, b, "down")

                proxy.sever()
                cut_at = time.time()
                await wait_until(lambda: engine.results.in_outage, what="the outage")
                # a goes down and comes back, b comes back, c goes down and is disabled by the
                # API (straight to the database): all while the engine can write nothing.
                c_site.status = 500
                await wait_until(lambda: _status(engine, c) == "down", what="c down")
                await disable_check(store, c)
                a_site.status = 500
                await wait_until(lambda: _status(engine, a) == "down", what="a down")
                a_site.status = 200
                b_site.status = 200
                await wait_until(lambda: (_status(engine, a) == "ok"
                                               and _status(engine, b) == "ok"),
                                 what="a and b ok again")
                assert engine.backlog > 0
                restored_at = time.time()
                proxy.restore()
                await wait_until(lambda: engine.backlog == 0, timeout=15,
                                 what="the held transitions written")
                assert (await wait_status(store, a, "ok"))["outage_id"] is None
                await wait_status(store, b, "ok")
                await wait_until(lambda: engine.check(c) is None, timeout=10,
                                 what="the disabled check dropped")
        assert (await wait_status(store, c, "paused"))["outage_id"] is None
        assert await fetch(store, "SELECT * FROM webhook_events WHERE check_id = $1", c) == []
        assert await fetch(store, "SELECT * FROM outages WHERE check_id = $1", c) == []

        for check_id in (a, b):
            events = await fetch(store, "SELECT * FROM webhook_events WHERE check_id = $1"
                                        " ORDER BY id", check_id)
            assert [e["event"] for e in events] == ["downtime", "uptime_restored"], check_id
            down, up = events
            assert up["parent_id"] == down["id"]
            (outage,) = await fetch(store, "SELECT * FROM outages WHERE check_id = $1",
                                    check_id)
            assert outage["alerted"] and outage["ended_at"] is not None
            # Closed when the site recovered, during the database outage.
            assert cut_at < _ts(outage["ended_at"]) < restored_at
            assert orjson.loads(up["body"])["check"]["status"] == "ok"
        (a_outage,) = await fetch(store, "SELECT * FROM outages WHERE check_id = $1", a)
        assert cut_at < _ts(a_outage["started_at"]) < _ts(a_outage["ended_at"]) < restored_at
        a_down = (await fetch(store, "SELECT body FROM webhook_events WHERE check_id = $1"
                                     " AND event = 'downtime'", a))[0]
        assert orjson.loads(a_down["body"])["check"]["error"] == "HTTP 500"
    finally:
        await engine_store.close()
        await proxy.stop()


def _status(engine: Any, check_id: int) -> str | None:
    c = engine.check(check_id)
    return c.state.status if c is not None else None


def _ts(value: Any) -> float:
    return float(value.astimezone(UTC).timestamp())
