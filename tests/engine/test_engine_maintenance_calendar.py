"""The engine's maintenance calendar over the real store: a monitor's own windows and its
account's, picked up by the reload loop without a restart, gone once deleted."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from engine.db.store import Store
from engine.domain.maintenance import Window
from engine.scheduler.calendar import MaintenanceCalendar
from tests.support.engine_support import add_monitor
from tests.support.wait import wait_until


async def test_the_calendar_follows_the_windows_of_a_monitor_and_its_account(
    store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    other, _ = await store.create_account("other")
    mine, _, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/")
    also_mine, _, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/x")
    theirs, _, _ = await add_monitor(store, other.id, "http://127.0.0.1:9/y")
    now = datetime.now(UTC).replace(microsecond=0)
    end = now + timedelta(hours=1)
    # No periodic reload within the test: only the notifications can bring the changes.
    calendar = MaintenanceCalendar(store, refresh=60.0)
    stop = asyncio.Event()
    loop = asyncio.create_task(calendar.run(stop))
    try:
        assert calendar.quiet(mine, acc.id, now) == (None, None)
        own = await store.create_window(
            acc.id, Window(0, "one monitor", (mine,), starts_at=now - timedelta(minutes=1),
                           ends_at=end))

        later = now + timedelta(seconds=5)  # windows count from their creation on

        async def muted(monitor_id: int, account_id: int, until: datetime = end) -> bool:
            return calendar.quiet(monitor_id, account_id, later)[0] == until

        await wait_until(lambda: muted(mine, acc.id), what="the window in the calendar")
        assert not await muted(also_mine, acc.id)
        await store.create_window(
            acc.id, Window(0, "everything", None, starts_at=now - timedelta(hours=2),
                           ends_at=end + timedelta(hours=1)))
        await wait_until(lambda: muted(also_mine, acc.id, end + timedelta(hours=1)),
                         what="the account-wide window")
        assert calendar.quiet(theirs, other.id, later) == (None, None)
        await store.delete_window(acc.id, own.id)

        # Gone: only the account-wide window is left for it.
        await wait_until(lambda: muted(mine, acc.id, end + timedelta(hours=1)),
                         what="the deleted window gone")
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await loop


async def test_a_weekly_window_in_a_time_zone_mutes_now(
    store: Store, account: tuple[Any, str]
) -> None:
    """A weekly window that began a minute ago, New York time, as the engine sees it."""
    acc, _ = account
    monitor_id, _, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/")
    zone = ZoneInfo("America/New_York")
    now = datetime.now(UTC).replace(microsecond=0)
    local = (now - timedelta(minutes=1)).astimezone(zone)
    await store.create_window(acc.id, Window(
        0, "weekly", (monitor_id,), weekday=local.weekday(),
        start_time=local.time().replace(tzinfo=None), duration_s=600,
        time_zone="America/New_York"))
    calendar = MaintenanceCalendar(store)
    await calendar.reload()
    muted_until, resumed_at = calendar.quiet(monitor_id, acc.id, now + timedelta(seconds=5))
    assert muted_until == now + timedelta(minutes=9)
    # Last week's occurrence came before the window was created: it does not count.
    assert resumed_at is None
