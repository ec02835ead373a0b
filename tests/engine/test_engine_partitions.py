"""Retention: daily result partitions made ahead (rows already in the default partition are
moved), old partitions dropped whole, old rollups deleted."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.db.partitions import PartitionUpkeep
from engine.db.probing import partition_name
from engine.db.store import Store
from tests.support.engine_support import add_monitor, fast_settings, fetch, fetchval


def _row(check_id: int, at: datetime) -> tuple[Any, ...]:
    return (check_id, at, 1, 0, 200, 5.0, None, 1.0, None, 2.0, "local", False, None)


async def partition_of(store: Store, check_id: int, at: datetime) -> str:
    return await fetchval(
        store,
        "SELECT tableoid::regclass::text FROM probe_results WHERE check_id = $1 AND at = $2",
        check_id, at)


async def test_partitions_ahead_retention_and_rollups(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    _, check_id, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/")
    now = datetime.now(UTC).replace(microsecond=0)
    today = now.date()
    # Results that arrived before partition upkeep ever ran sit in the default partition.
    early = now - timedelta(minutes=1)
    old_day = today - timedelta(days=40)
    ancient = datetime.combine(old_day, datetime.min.time(), UTC) + timedelta(hours=3)
    rows = [_row(check_id, early), _row(check_id, ancient)]
    await store.write_results(rows, {})
    assert await partition_of(store, check_id, early) == "probe_results_default"

    settings = fast_settings(tmp_path, results_retention_days=8, rollup_retention_days=31)
    m = PartitionUpkeep(store, settings)
    done = await m.run_once(now)
    assert done["created"] == 4
    days = await store.result_partitions()
    assert days == [today + timedelta(days=i) for i in range(4)]
    # Today's early rows moved into today's partition; indexes exist there too.
    assert await partition_of(store, check_id, early) == partition_name(today)
    idx = await fetch(store, "SELECT indexname FROM pg_indexes WHERE tablename = $1",
                      partition_name(today))
    assert idx
    # Rows older than the retention left the default partition; the old rollup went too.
    assert await fetchval(store, "SELECT count(*) FROM probe_results WHERE at = $1",
                          ancient) == 0
    assert await fetchval(store, "SELECT count(*) FROM check_rollups_hourly WHERE hour < $1",
                          now - timedelta(days=31)) == 0
    assert await fetchval(store, "SELECT count(*) FROM check_rollups_hourly") == 1

    # A second pass is a no-op; a pass 10 days later drops the partitions past retention.
    assert (await m.run_once(now))["created"] == 0
    later = now + timedelta(days=10)
    await store.write_results([_row(check_id, now)], {})
    done = await m.run_once(later)
    later_day = later.date()
    days = await store.result_partitions()
    assert min(days) >= later_day - timedelta(days=8)
    assert max(days) == later_day + timedelta(days=3)
    assert done["dropped"] == 2  # today and tomorrow's partitions are now over 8 days old


async def test_two_nodes_at_once_do_not_collide(store: Store, tmp_path: Path) -> None:
    settings = fast_settings(tmp_path)
    a, b = PartitionUpkeep(store, settings), PartitionUpkeep(store, settings)
    day = date(2030, 1, 1)
    when = datetime.combine(day, datetime.min.time(), UTC)
    await asyncio.gather(a.run_once(when), b.run_once(when))
    assert await store.result_partitions() == [day + timedelta(days=i) for i in range(4)]


async def test_run_stops_promptly(store: Store, tmp_path: Path) -> None:
    m = PartitionUpkeep(store, fast_settings(tmp_path))
    stop = asyncio.Event()
    task = asyncio.create_task(m.run(stop))
    while not await store.result_partitions():
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 2)
