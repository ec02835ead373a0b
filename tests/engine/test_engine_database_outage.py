"""A real database outage (connections reset, new ones refused): the engine keeps probing,
keeps its results in the bounded buffer (dropping the oldest past the bound), and once the
database is back it writes the backlog, applies the transition it could not write, and picks
up changes made meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.db.store import Store
from engine.runtime.metrics import Metrics
from tests.support.engine_support import (
    DbProxy,
    add_monitor,
    fast_settings,
    fetch,
    running_engine,
    wait_status,
)
from tests.support.metrics import sample
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until


async def test_engine_rides_out_a_database_outage(
    store: Store, db_dsn: str, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    proxy = await DbProxy(db_dsn).start()
    engine_store = await Store.connect(proxy.dsn, min_size=1, max_size=5)
    settings = fast_settings(tmp_path, result_buffer_limit=100, resync_interval=0.5)
    metrics = Metrics()
    try:
        async with HttpTarget() as site:
            _, check_id, _ = await add_monitor(store, acc.id, site.url("/"))
            _, other_id, _ = await add_monitor(store, acc.id, site.url("/other"))
            for i in range(10):  # enough probes per second to fill the buffer quickly
                await add_monitor(store, acc.id, site.url(f"/fill{i}"))
            async with running_engine(engine_store, settings, metrics=metrics) as engine:
                await wait_status(store, check_id, "ok")
                proxy.sever()
                site.status = 500
                await wait_until(lambda: engine.results.in_outage, what="the outage")
                # Probing goes on, without a database: the buffer fills to its bound.
                seen = len(site.requests)
                await wait_until(lambda: len(site.requests) >= seen + 120,
                                 timeout=20, what="probes during the outage")
                assert engine.results.depth <= 100
                assert sample(metrics, "upwatch_results_dropped_total") > 0
                # Meanwhile the API disables the other check (its NOTIFY is lost).
                async with store.pool.acquire() as conn:
                    await conn.execute(
                        "UPDATE checks SET is_enabled = false, status = 'paused',"
                        " config_version = config_version + 1 WHERE id = $1", other_id)
                proxy.restore()
                down = await wait_status(store, check_id, "down", timeout=15)
                assert down["error"] == "HTTP 500"
                events = await fetch(
                    store, "SELECT event FROM webhook_events WHERE check_id = $1", check_id)
                assert [e["event"] for e in events] == ["downtime"]
                await wait_until(lambda: engine.check(other_id) is None,
                                 timeout=10, what="the resync to drop the disabled check")
                await wait_until(lambda: not engine.results.in_outage,
                                 what="results written again")
        n = await fetch(store, "SELECT count(*) AS n FROM probe_results WHERE check_id = $1",
                        check_id)
        assert n[0]["n"] > 0
    finally:
        await engine_store.close()
        await proxy.stop()
