"""The status page announces a maintenance window that is on now or starts within a week,
in HTML (escaped like every user string) and in its JSON twin."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.domain.maintenance import Window
from engine.domain.timefmt import fmt, utcnow


async def _monitor(store: Store, account_id: int, host: str, alias: str) -> Any:
    """An HTTPS monitor of ``host`` checked every 30 s, alerting at once."""
    return await store.create_monitor(
        account_id, url=f"https://{host}/", scheme="https", host=host, port="", alias=alias,
        interval=30, notification_threshold=0, certificate_interval=3600, monitor_limit=1000)


async def test_current_and_upcoming_windows_are_announced(
    store: Store, account: tuple[Any, str], status_page_url: str
) -> None:
    acc, _ = account
    m = await _monitor(store, acc.id, "example.com", "Shop")
    other = await _monitor(store, acc.id, "example.org", "Blog")
    now = utcnow().replace(microsecond=0)
    async with aiohttp.ClientSession(base_url=status_page_url) as s:
        async with s.get(f"/{m.identifier}") as r:
            assert "maintenance" not in (await r.text()).lower()
        await store.create_window(acc.id, Window(0, "<b>DB upgrade</b>", (m.id,),
                                  starts_at=now - timedelta(minutes=10),
                                  ends_at=now + timedelta(hours=1)))
        await store.create_window(acc.id, Window(0, "", None,
                                  starts_at=now + timedelta(days=2),
                                  ends_at=now + timedelta(days=2, hours=2)))
        await store.create_window(acc.id, Window(0, "far away", None,
                                  starts_at=now + timedelta(days=20),
                                  ends_at=now + timedelta(days=20, hours=2)))
        async with s.get(f"/{m.identifier}") as r:
            assert r.status == 200
            html = await r.text()
        assert "Maintenance in progress" in html
        assert f"until {fmt(now + timedelta(hours=1))} UTC" in html
        assert "&lt;b&gt;DB upgrade&lt;/b&gt;" in html and "<b>DB upgrade" not in html
        assert "Scheduled maintenance" in html
        assert f"from {fmt(now + timedelta(days=2))}" in html
        assert "far away" not in html
        async with s.get(f"/{m.identifier}.json") as r:
            body = await r.json()
        assert body["maintenance"] == [
            {"active": True, "starts_at": fmt(now - timedelta(minutes=10)),
             "ends_at": fmt(now + timedelta(hours=1)), "reason": "<b>DB upgrade</b>"},
            {"active": False, "starts_at": fmt(now + timedelta(days=2)),
             "ends_at": fmt(now + timedelta(days=2, hours=2)), "reason": ""},
        ]
        # The other monitor: only the account-wide window.
        async with s.get(f"/{other.identifier}.json") as r:
            assert [n["active"] for n in (await r.json())["maintenance"]] == [False]


async def test_the_30_day_uptime_leaves_maintenance_out(
    store: Store, account: tuple[Any, str], status_page_url: str
) -> None:
    acc, _ = account
    m = await _monitor(store, acc.id, "example.com", "Shop")
    cid = m.checks["uptime"].id
    now = utcnow()
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE check_periods SET started_at = $2 WHERE check_id = $1",
                           cid, now - timedelta(days=10))
        await conn.execute(
            "INSERT INTO check_rollups_hourly (check_id, hour, probes, responses,"
            " response_ms_sum) VALUES ($1, date_trunc('hour', now()), 100, 100, 5000)", cid)
        await conn.execute(
            "INSERT INTO outages (check_id, started_at, ended_at, http_status_code)"
            " VALUES ($1, $2, $3, 500)", cid, now - timedelta(hours=5), now - timedelta(hours=3))
    async with aiohttp.ClientSession(base_url=status_page_url) as s:
        async with s.get(f"/{m.identifier}.json") as r:
            before = (await r.json())["uptime_30d"]
        assert before < 100
        # A window over the whole outage, declared a day ahead.
        await store.create_window(acc.id, Window(
            0, "move", (m.id,), starts_at=now - timedelta(hours=6),
            ends_at=now - timedelta(hours=2)))
        async with store.pool.acquire() as conn:
            await conn.execute("UPDATE maintenance_windows SET created_at = $1",
                               now - timedelta(days=1))
        async with s.get(f"/{m.identifier}.json") as r:
            body = await r.json()
        assert body["uptime_30d"] == 100.0
        assert body["maintenance"] == []  # over: no notice
        async with s.get(f"/{m.identifier}") as r:
            html = await r.text()
        figure = html.split("Uptime, last 30 days", 1)[1].split('class="value">', 1)[1]
        assert figure.startswith("100%<")


async def test_a_days_bar_leaves_maintenance_out(
    store: Store, account: tuple[Any, str], status_page_url: str
) -> None:
    """An outage 40 days ago (outside the 30-day figure, inside the 90 bars) that fell in a
    window declared beforehand: its day's bar shows full uptime, as the 30-day figure would."""
    acc, _ = account
    m = await _monitor(store, acc.id, "example.com", "Shop")
    cid = m.checks["uptime"].id
    now = utcnow()
    noon = now.replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=40)
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE check_periods SET started_at = $2 WHERE check_id = $1",
                           cid, now - timedelta(days=60))
        await conn.execute(
            "INSERT INTO check_rollups_hourly (check_id, hour, probes, responses,"
            " response_ms_sum) VALUES ($1, $2, 100, 100, 5000)", cid, noon)
        await conn.execute(
            "INSERT INTO outages (check_id, started_at, ended_at, http_status_code)"
            " VALUES ($1, $2, $3, 500)", cid, noon, noon + timedelta(hours=2))
    day = noon.date().isoformat()

    async def bar() -> Any:
        async with aiohttp.ClientSession(base_url=status_page_url) as s:
            async with s.get(f"/{m.identifier}.json") as r:
                assert r.status == 200
                body = await r.json()
        return next(d["uptime_percentage"] for d in body["days"] if d["date"] == day)

    before = await bar()
    assert before is not None and before < 95
    assert before == pytest.approx(100 * (1 - 2 / 24), abs=0.001)
    # A window beside the outage takes its 2 hours out of the day, not the outage's.
    await store.create_window(acc.id, Window(
        0, "elsewhere", (m.id,), starts_at=noon - timedelta(hours=5),
        ends_at=noon - timedelta(hours=3)))
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE maintenance_windows SET created_at = $1",
                           noon - timedelta(days=1))
    assert await bar() == pytest.approx(100 * (1 - 2 / 22), abs=0.001)
    await store.create_window(acc.id, Window(
        0, "move", (m.id,), starts_at=noon - timedelta(hours=1),
        ends_at=noon + timedelta(hours=3)))
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE maintenance_windows SET created_at = $1",
                           noon - timedelta(days=1))
    assert await bar() == 100.0
