"""30-day statistics and the uptime meta, from rollups, outages and enabled periods."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.db.monitor_records import MonitorRecord
from engine.db.store import Store
from engine.domain.stats import average_ms, uptime_percentage
from engine.domain.timefmt import fmt, utcnow

DAY = 86400.0


def test_uptime_percentage_rules() -> None:
    assert uptime_percentage(0, 1000, 5) == 100.0
    assert uptime_percentage(100, 1000, 5) == 90.0
    assert uptime_percentage(500, 0, 0) == 100.0  # not run: 100
    assert uptime_percentage(500, 1000, 0) == 100.0
    assert uptime_percentage(5000, 1000, 3) == 0.0  # clamped
    assert uptime_percentage(-5, 1000, 3) == 100.0
    assert uptime_percentage(1, 30 * DAY, 3) == 99.999  # downtime never rounds to 100
    assert uptime_percentage(1000, 3000, 3) == 66.667


def test_average_response_time() -> None:
    assert average_ms(0, 0) == 0.0
    assert average_ms(14000, 110) == 127.273


async def new_monitor(store: Store, account_id: int, host: str = "example.com") -> MonitorRecord:
    return await store.create_monitor(
        account_id, url=f"https://{host}/", scheme="https", host=host, port="", alias=host,
        interval=30, notification_threshold=0, certificate_interval=3600, monitor_limit=1000)


async def write_history(conn: asyncpg.Connection, check_id: int, now: datetime) -> None:
    """Enabled since 40 days; three outages touching the window, one before it; rollups."""
    await conn.execute("DELETE FROM check_periods WHERE check_id = $1", check_id)
    await conn.execute("INSERT INTO check_periods (check_id, started_at) VALUES ($1, $2)",
                       check_id, now - timedelta(days=40))
    outages = [
        (now - timedelta(days=40), now - timedelta(days=35), 500),          # before: ignored
        (now - timedelta(days=31), now - timedelta(days=30, seconds=-600), 502),  # 600 s in
        (now - timedelta(days=10), now - timedelta(days=10, seconds=-3600), None),  # 3600 s
        (now - timedelta(seconds=300), None, 503),                            # ongoing: 300 s
    ]
    for start, end, code in outages:
        await conn.execute(
            "INSERT INTO outages (check_id, started_at, ended_at, http_status_code)"
            " VALUES ($1, $2, $3, $4)", check_id, start, end, code)
    rollups = [
        (now - timedelta(days=31), 500, 500, 99999.0),  # outside the window
        (now - timedelta(days=29), 100, 90, 9000.0),
        (now - timedelta(hours=1), 20, 20, 5000.0),
    ]
    for hour, probes, responses, ms in rollups:
        await conn.execute(
            "INSERT INTO check_rollups_hourly (check_id, hour, probes, responses, response_ms_sum)"
            " VALUES ($1, $2, $3, $4, $5)", check_id, hour, probes, responses, ms)


async def test_statistics_over_a_fixed_clock(store: Store, account: tuple[Any, str]) -> None:
    acc, _ = account
    m = await new_monitor(store, acc.id)
    now = datetime.fromisoformat("2026-06-15T12:00:00+00:00")
    async with store.pool.acquire() as conn:
        await write_history(conn, m.checks["uptime"].id, now)
    stats = await store.monitor_statistics(acc.id, m.id, now=now)
    assert stats.figures.checks_run == 120
    assert stats.figures.average_response_ms == 127.273
    assert stats.figures.outage_seconds == pytest.approx(4500)
    assert stats.figures.enabled_seconds == pytest.approx(30 * DAY)
    assert stats.figures.uptime_percentage == round(100 * (1 - 4500 / (30 * DAY)), 3)
    assert stats.figures.offline_since == now - timedelta(seconds=300)
    assert [o.http_status_code for o in stats.outages] == [503, None, 502]


async def test_only_enabled_time_counts(store: Store, account: tuple[Any, str]) -> None:
    acc, _ = account
    m = await new_monitor(store, acc.id)
    cid = m.checks["uptime"].id
    now = datetime.fromisoformat("2026-06-15T12:00:00+00:00")
    async with store.pool.acquire() as conn:
        await conn.execute("DELETE FROM check_periods WHERE check_id = $1", cid)
        for start, end in [(now - timedelta(days=40), now - timedelta(days=20)),
                           (now - timedelta(days=10), None)]:
            await conn.execute(
                "INSERT INTO check_periods (check_id, started_at, ended_at) VALUES ($1, $2, $3)",
                cid, start, end)
        await conn.execute(
            "INSERT INTO outages (check_id, started_at, ended_at) VALUES ($1, $2, $3)",
            cid, now - timedelta(days=5), now - timedelta(days=4))
        await conn.execute(
            "INSERT INTO check_rollups_hourly (check_id, hour, probes) VALUES ($1, $2, 1)",
            cid, now - timedelta(days=1))
    stats = await store.monitor_statistics(acc.id, m.id, now=now)
    assert stats.figures.enabled_seconds == pytest.approx(20 * DAY)
    assert stats.figures.uptime_percentage == 95.0
    assert stats.figures.average_response_ms == 0.0  # probes, but none answered


async def test_the_statistics_endpoint(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str],
) -> None:
    acc, _ = account
    m = await new_monitor(store, acc.id)
    now = utcnow()
    async with store.pool.acquire() as conn:
        await write_history(conn, m.checks["uptime"].id, now)
    async with client.get(f"/webapi/monitors/{m.id}/statistics") as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "application/json"
        body = await r.json()
    assert set(body) == {"uptime_percentage_30d", "average_response_time_ms", "checks_run_30d",
                         "outages"}
    assert body["checks_run_30d"] == 120
    assert body["average_response_time_ms"] == 127.273
    assert 99.82 <= body["uptime_percentage_30d"] <= 99.83
    ongoing, hour_long, clipped = body["outages"]
    assert ongoing["ended_at"] is None
    assert ongoing["started_at"] == fmt(now - timedelta(seconds=300))
    assert 300 <= ongoing["duration_seconds"] <= 330
    assert ongoing["http_status_code"] == 503
    assert hour_long == {
        "started_at": fmt(now - timedelta(days=10)),
        "ended_at": fmt(now - timedelta(days=10, seconds=-3600)),
        "duration_seconds": 3600, "http_status_code": None,
    }
    assert clipped["duration_seconds"] == DAY + 600  # the whole outage, not the clipped part
    assert isinstance(clipped["duration_seconds"], int)

    # The monitor's meta shows the same figures, and offline_since the ongoing outage.
    async with client.get(f"/webapi/monitors/{m.id}") as r:
        meta = (await r.json())["checks"]["uptime"]["meta"]
    assert meta["average_uptime_percentage"] == pytest.approx(body["uptime_percentage_30d"],
                                                              abs=0.001)
    assert meta["average_response_time"] == 127.273
    assert meta["offline_since"] == ongoing["started_at"]


async def test_a_new_monitor_has_clean_statistics(client: aiohttp.ClientSession) -> None:
    async with client.post("/webapi/monitors", json={"url": "https://example.com"}) as r:
        mid = (await r.json())["id"]
    async with client.get(f"/webapi/monitors/{mid}/statistics") as r:
        assert await r.json() == {"uptime_percentage_30d": 100.0, "average_response_time_ms": 0.0,
                                  "checks_run_30d": 0, "outages": []}


class CountingConnection:
    """A connection proxy that counts the statements sent through it."""

    def __init__(self, conn: asyncpg.Connection, counter: list[str]) -> None:
        self._conn = conn
        self._counter = counter

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._conn, name)
        if name in ("fetch", "fetchrow", "fetchval", "execute"):
            async def counted(sql: str, *args: Any) -> Any:
                self._counter.append(sql)
                return await attr(sql, *args)
            return counted
        return attr


async def test_the_list_and_a_get_take_one_query_each(
    store: Store, account: tuple[Any, str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Monitors and their figures come in one statement (one round trip, no BEGIN/COMMIT),
    whatever the number of monitors."""
    acc, _ = account
    statements: list[str] = []
    real_conn = store._conn

    @contextlib.asynccontextmanager
    async def counting_conn() -> AsyncIterator[Any]:
        async with real_conn() as conn:
            yield CountingConnection(conn, statements)

    monkeypatch.setattr(store, "_conn", counting_conn)
    first = await new_monitor(store, acc.id, "first.example")
    statements.clear()
    assert len(await store.list_monitors(acc.id)) == 1
    assert len(statements) == 1
    for i in range(25):
        await new_monitor(store, acc.id, f"m{i}.example")
    statements.clear()
    listed = await store.list_monitors(acc.id)
    assert len(listed) == 26
    assert len(statements) == 1
    assert all(m.uptime is not None for m in listed)
    statements.clear()
    got = await store.get_monitor(acc.id, first.id)
    assert got.id == first.id and got.uptime is not None
    assert len(statements) == 1
