"""Maintenance windows through the real engine against real targets: probes go on and are
stored, no downtime or restored event is sent during a window, and an outage still open when
a window ends is judged afresh from that moment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.db.store import Store
from engine.domain.maintenance import Window
from engine.scheduler.calendar import MaintenanceCalendar
from tests.support.engine_support import (
    add_monitor,
    check_row,
    events_of,
    fast_settings,
    fetch,
    fetchval,
    running_engine,
    wait_status,
)
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until

WINDOW = 3.0  # real seconds a test window stays on (windows are wall-clock, never scaled)


async def probes_since(store: Store, check_id: int, since: datetime) -> int:
    return int(await fetchval(
        store, "SELECT count(*) FROM probe_results WHERE check_id = $1 AND at >= $2",
        check_id, since))


@pytest.mark.serial  # its windows last seconds of wall time: run alone (scripts/test)
async def test_a_window_that_opens_during_an_outage_holds_the_restore_until_it_ends(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    calendar = MaintenanceCalendar(store, refresh=60.0)  # reloaded by the test itself
    async with HttpTarget() as site:
        monitor_id, check_id, _ = await add_monitor(store, acc.id, site.url("/"))
        async with running_engine(store, fast_settings(tmp_path), calendar=calendar):
            await wait_status(store, check_id, "ok")
            site.status = 500
            await wait_status(store, check_id, "down")
            [downtime] = await events_of(store, check_id)
            now = datetime.now(UTC)
            end = now + timedelta(seconds=WINDOW)
            await store.create_window(acc.id, Window(0, "fixing it", (monitor_id,),
                                      starts_at=now - timedelta(minutes=1), ends_at=end))
            await calendar.reload()
            site.status = 200
            # Good probes in the window: stored, the check stays down, nothing is sent.
            async def recovering() -> Any:
                row = await check_row(store, check_id)
                return row if row["recovering_since"] is not None else None

            row = await wait_until(recovering, what="good probes during the window")
            assert row["status"] == "down"
            since = row["recovering_since"]
            await wait_until(lambda: probes_since(store, check_id, since),
                             what="stored probes in the window")
            assert datetime.now(UTC) < end, "the machine is too slow for this window"
            assert [e["id"] for e in await events_of(store, check_id)] == [downtime["id"]]
            # After the window: the restore goes out, parented to the downtime event.
            await wait_status(store, check_id, "ok", timeout=WINDOW + 10)
            _, restored = await events_of(store, check_id)
            assert restored["event"] == "uptime_restored"
            assert restored["parent_id"] == downtime["id"]
            assert restored["created_at"] >= end
            [outage] = await fetch(store, "SELECT * FROM outages WHERE check_id = $1", check_id)
            assert outage["ended_at"] >= end


@pytest.mark.serial  # its windows last seconds of wall time: run alone (scripts/test)
async def test_a_window_that_closes_during_an_outage_alerts_after_the_threshold_from_its_end(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    calendar = MaintenanceCalendar(store, refresh=60.0)
    threshold = 60  # s: 0.6 s scaled
    async with HttpTarget() as site:
        _, check_id, _ = await add_monitor(store, acc.id, site.url("/"), threshold=threshold)
        async with running_engine(store, fast_settings(tmp_path), calendar=calendar):
            await wait_status(store, check_id, "ok")
            now = datetime.now(UTC)
            end = now + timedelta(seconds=WINDOW)
            # For every monitor of the account.
            await store.create_window(acc.id, Window(0, "deploy", None,
                                      starts_at=now - timedelta(minutes=1), ends_at=end))
            await calendar.reload()
            site.status = 503
            # Confirmed in the window (an outage row, for history), but never down.
            async def confirmed() -> Any:
                row = await check_row(store, check_id)
                return row if row["outage_id"] is not None else None

            row = await wait_until(confirmed, what="a confirmed outage in the window")
            assert row["status"] == "failing"
            first_failure = row["failing_since"]
            count = await probes_since(store, check_id, first_failure)
            # Longer than the threshold passes inside the window, still nothing sent.
            await wait_until(
                lambda: probes_since(store, check_id, first_failure + timedelta(seconds=0.7)),
                what="probes past the threshold in the window")
            assert datetime.now(UTC) < end, "the machine is too slow for this window"
            assert (await check_row(store, check_id))["status"] == "failing"  # type: ignore[index]
            assert await events_of(store, check_id) == []
            assert await probes_since(store, check_id, first_failure) > count  # stored
            # After it: down once the threshold has passed since the window's end.
            await wait_status(store, check_id, "down", timeout=WINDOW + 10)
            [downtime] = await events_of(store, check_id)
            assert downtime["event"] == "downtime"
            assert (downtime["created_at"] - end).total_seconds() >= threshold * 0.01
            [outage] = await fetch(store, "SELECT * FROM outages WHERE check_id = $1", check_id)
            assert outage["alerted"] is True and outage["started_at"] == first_failure
