"""Heartbeats through the real engine and PostgreSQL (time scaled 100x): each down reason
goes down once with a downtime event named heartbeat, the next good ping restores it, a
ping during a maintenance window sends nothing until the window ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from engine.db.heartbeats import IncomingPing
from engine.db.store import Store
from engine.domain import heartbeat as hb
from engine.domain.maintenance import Window
from engine.scheduler.calendar import MaintenanceCalendar
from tests.support.engine_support import (
    check_row,
    events_of,
    fast_settings,
    running_engine,
    wait_status,
)
from tests.support.wait import wait_until


async def new_heartbeat(store: Store, account_id: int, **config: Any) -> tuple[int, int, str]:
    """(monitor id, check id, ping uuid) of a new heartbeat."""
    cfg = {"grace_s": 60, "period_s": 60, **config}
    monitor, beat = await store.create_heartbeat(
        account_id, alias="job", config=hb.Config(**cfg), monitor_limit=100)
    return monitor.id, beat.check_id, beat.ping_uuid


async def ping(store: Store, ping_uuid: str, kind: str = hb.SUCCESS, **kw: Any) -> None:
    p = hb.Ping(kind=kind, at=datetime.now(UTC), **kw)
    assert await store.record_pings([IncomingPing(ping_uuid, p, "GET", None, None, False)]) \
        == [True]


def body(event: Any) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(event["body"])
    return data


async def test_silence_past_the_deadline_goes_down_once_and_a_ping_restores(
    store: Store, account: tuple[Any, str], tmp_path: Path,
) -> None:
    acc, _ = account
    _, cid, pid = await new_heartbeat(store, acc.id)
    async with running_engine(store, fast_settings(tmp_path)):
        await ping(store, pid)
        await wait_status(store, cid, "ok")
        # No ping for period + grace (1.2 s scaled): down, one downtime event.
        row = await wait_status(store, cid, "down", timeout=15)
        assert row["error"].startswith("no ping since ")
        [down] = await events_of(store, cid)
        assert down["event"] == "downtime"
        sent = body(down)
        assert sent["check"]["name"] == "heartbeat" and sent["check"]["status"] == "nok"
        assert sent["check"]["error"] == row["error"]
        await ping(store, pid)
        await wait_status(store, cid, "ok")
        _, restored = await events_of(store, cid)
        assert restored["event"] == "uptime_restored"
        assert restored["parent_id"] == down["id"]
        assert body(restored)["check"]["name"] == "heartbeat"


async def test_a_heartbeat_never_pinged_stays_pending(
    store: Store, account: tuple[Any, str], tmp_path: Path,
) -> None:
    acc, _ = account
    _, cid, _ = await new_heartbeat(store, acc.id)
    async with running_engine(store, fast_settings(tmp_path)):
        _, other, other_pid = await new_heartbeat(store, acc.id)
        await ping(store, other_pid)
        await wait_status(store, other, "ok")
        await wait_status(store, other, "down", timeout=15)  # well past cid's deadline too
        row = await check_row(store, cid)
        assert row is not None and row["status"] == "pending"
        assert await events_of(store, cid) == []


async def test_exit_status_and_fail_pings_go_down_at_once_with_their_words(
    store: Store, account: tuple[Any, str], tmp_path: Path,
) -> None:
    acc, _ = account
    _, cid, pid = await new_heartbeat(store, acc.id, period_s=86400, grace_s=3600)
    async with running_engine(store, fast_settings(tmp_path)):
        await ping(store, pid)
        await wait_status(store, cid, "ok")
        await ping(store, pid, hb.FAIL, exit_status=2)
        row = await wait_status(store, cid, "down")
        assert row["error"] == "exit status 2"
        await ping(store, pid)
        await wait_status(store, cid, "ok")
        await ping(store, pid, hb.FAIL)
        row = await wait_status(store, cid, "down")
        assert row["error"] == "the job reported a failure"
        assert [e["event"] for e in await events_of(store, cid)] == [
            "downtime", "uptime_restored", "downtime"]


async def test_a_run_past_max_runtime_goes_down_while_other_runs_succeed(
    store: Store, account: tuple[Any, str], tmp_path: Path,
) -> None:
    acc, _ = account
    _, cid, pid = await new_heartbeat(store, acc.id, period_s=86400, grace_s=3600,
                                      max_runtime_s=120)
    async with running_engine(store, fast_settings(tmp_path)):
        await ping(store, pid, hb.START, rid="a")
        await ping(store, pid, hb.START, rid="b")
        await ping(store, pid, hb.SUCCESS, rid="b")
        await wait_status(store, cid, "ok")
        row = await wait_status(store, cid, "down", timeout=15)
        assert "still running after 1 s (max_runtime)" in row["error"]
        await ping(store, pid, hb.SUCCESS, rid="a")
        await wait_status(store, cid, "ok")


async def test_a_too_fast_run_is_a_failure(
    store: Store, account: tuple[Any, str], tmp_path: Path,
) -> None:
    acc, _ = account
    _, cid, pid = await new_heartbeat(store, acc.id, period_s=86400, grace_s=3600,
                                      min_runtime_s=6000)
    async with running_engine(store, fast_settings(tmp_path, time_scale=1.0)):
        await ping(store, pid, hb.START)
        await ping(store, pid)
        row = await wait_status(store, cid, "down")
        assert row["error"].startswith("finished in 0 s, expected at least 1 h 40 min")


async def test_a_failure_in_a_maintenance_window_alerts_only_after_it(
    store: Store, account: tuple[Any, str], tmp_path: Path,
) -> None:
    acc, _ = account
    monitor_id, cid, pid = await new_heartbeat(store, acc.id, period_s=86400, grace_s=3600)
    calendar = MaintenanceCalendar(store, refresh=60.0)
    async with running_engine(store, fast_settings(tmp_path), calendar=calendar):
        await ping(store, pid)
        await wait_status(store, cid, "ok")
        now = datetime.now(UTC)
        end = now + timedelta(seconds=4)
        await store.create_window(acc.id, Window(0, "migration", (monitor_id,),
                                  starts_at=now - timedelta(minutes=1), ends_at=end))
        await calendar.reload()
        await ping(store, pid, hb.FAIL, exit_status=1)
        row = await wait_status(store, cid, "failing")
        assert row["error"] == "exit status 1"
        assert await events_of(store, cid) == []
        await wait_status(store, cid, "down", timeout=20)
        [down] = await events_of(store, cid)
        assert down["created_at"] >= end

        async def one_event() -> bool:
            return len(await events_of(store, cid)) == 1

        assert await wait_until(one_event, what="a single alert")


async def test_a_heartbeat_enabled_again_waits_for_its_next_ping(
    store: Store, account: tuple[Any, str], tmp_path: Path,
) -> None:
    acc, _ = account
    _, cid, pid = await new_heartbeat(store, acc.id)
    async with running_engine(store, fast_settings(tmp_path)):
        await ping(store, pid)
        await wait_status(store, cid, "ok")
        await store.set_check_enabled(acc.id, cid, False)
        await ping(store, pid, hb.FAIL)  # recorded while paused
        await store.set_check_enabled(acc.id, cid, True)
        _, other, other_pid = await new_heartbeat(store, acc.id)
        await ping(store, other_pid)
        await wait_status(store, other, "down", timeout=15)  # past cid's deadline too
        row = await check_row(store, cid)
        assert row is not None and row["status"] == "pending"
        assert await events_of(store, cid) == []
        await ping(store, pid)
        await wait_status(store, cid, "ok")
