"""The status page's reads (engine/db/public.py) against real PostgreSQL: exact figures on a
small hand-made history, the limits that keep the page cheap, and that every query is
served by an index."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.db import public
from engine.db.public import DAYS_SHOWN, OUTAGES_SHOWN
from engine.db.store import Store
from engine.domain.stats import uptime_percentage as uptime_percent
from tests.support.status_page_seed import insert_monitor, insert_outage, insert_rollups, seed_site

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
DAY = 86400


async def _hand_made(store: Store) -> int:
    """Uptime check enabled 03-01 00:00 to 03-03 12:00 and from 03-04 00:00 on; rollups every
    hour of those days except 03-05 (no data); outages 03-08 23:00 to 03-09 01:00 (across
    midnight) and 03-10 11:30 until now (ongoing). Returns the uptime check id."""
    async with store.pool.acquire() as conn, conn.transaction():
        site = await insert_monitor(conn, identifier="handmade-0001", uptime_status="down")
        await conn.executemany(
            "INSERT INTO check_periods (check_id, started_at, ended_at) VALUES ($1, $2, $3)",
            [
                (site.uptime_id, datetime(2026, 3, 1, tzinfo=UTC),
                 datetime(2026, 3, 3, 12, tzinfo=UTC)),
                (site.uptime_id, datetime(2026, 3, 4, tzinfo=UTC), None),
            ],
        )
        await insert_rollups(
            conn, site.uptime_id, datetime(2026, 3, 1, tzinfo=UTC), NOW,
            skip_days=(datetime(2026, 3, 5, tzinfo=UTC),),
        )
        await insert_outage(conn, site.uptime_id, datetime(2026, 3, 8, 23, tzinfo=UTC),
                            datetime(2026, 3, 9, 1, tzinfo=UTC))
        await insert_outage(conn, site.uptime_id, datetime(2026, 3, 10, 11, 30, tzinfo=UTC), None)
        return site.uptime_id


async def test_unknown_identifier_is_none(store: Store) -> None:
    assert await store.status_page("nosuchmonitor0", now=NOW) is None


async def test_daily_bars_clip_outages_and_enabled_time_to_utc_days(store: Store) -> None:
    await _hand_made(store)
    data = await store.status_page("handmade-0001", now=NOW)
    assert data is not None
    assert len(data.days) == DAYS_SHOWN
    by_day = {d.day.isoformat(): d for d in data.days}
    assert data.days[-1].day.isoformat() == "2026-03-10"
    assert data.days[0].day.isoformat() == "2025-12-11"

    # Before the check existed: no probes, no data.
    assert by_day["2026-02-28"].uptime is None
    # A day without rollups is "no data" even though the check was enabled.
    assert by_day["2026-03-05"].uptime is None
    assert by_day["2026-03-05"].enabled_seconds == DAY
    # Full, clean days.
    assert by_day["2026-03-01"].uptime == 100.0
    assert by_day["2026-03-01"].probes == 24 * 120
    # Half a day enabled, no outage: still 100.
    assert by_day["2026-03-03"].enabled_seconds == DAY / 2
    assert by_day["2026-03-03"].uptime == 100.0
    # The outage across midnight counts one hour on each side.
    assert by_day["2026-03-08"].outage_seconds == 3600
    assert by_day["2026-03-09"].outage_seconds == 3600
    assert by_day["2026-03-09"].uptime == round(100 * (1 - 3600 / DAY), 3)
    # Today so far: 12 h enabled, the ongoing outage counts up to now.
    today = by_day["2026-03-10"]
    assert today.enabled_seconds == 12 * 3600
    assert today.outage_seconds == 1800
    assert today.uptime == round(100 * (1 - 1800 / (12 * 3600)), 3)


async def test_thirty_day_uptime_follows_the_statistics_rule(store: Store) -> None:
    await _hand_made(store)
    data = await store.status_page("handmade-0001", now=NOW)
    assert data is not None
    enabled = 2.5 * DAY + 6.5 * DAY
    outage = 3600 * 2 + 1800
    assert data.uptime_30d == round(100 * (1 - outage / enabled), 3)
    assert data.probes_30d > 0


async def test_thirty_day_uptime_is_100_before_any_probe(store: Store) -> None:
    async with store.pool.acquire() as conn:
        site = await insert_monitor(conn, identifier="fresh-monitor-1", uptime_status="pending")
        await conn.execute("INSERT INTO check_periods (check_id, started_at) VALUES ($1, $2)",
                           site.uptime_id, NOW - timedelta(hours=1))
    data = await store.status_page("fresh-monitor-1", now=NOW)
    assert data is not None
    assert data.uptime_30d == 100.0
    assert all(d.uptime is None for d in data.days)
    assert data.responses == [] and data.outages == []


def test_uptime_percent_never_rounds_downtime_away() -> None:
    assert uptime_percent(1, 30 * DAY, 10) == 99.999
    assert uptime_percent(0, 30 * DAY, 10) == 100.0
    assert uptime_percent(10, 0, 10) == 100.0
    assert uptime_percent(50, 100, 0) == 100.0
    assert uptime_percent(200, 100, 5) == 0.0


async def test_recent_outages_newest_first_limited_with_ongoing_duration(store: Store) -> None:
    async with store.pool.acquire() as conn:
        site = await insert_monitor(conn, identifier="outages-00001")
        for i in range(OUTAGES_SHOWN + 3):
            start = NOW - timedelta(days=i + 1)
            await insert_outage(conn, site.uptime_id, start, start + timedelta(minutes=i + 1))
        await insert_outage(conn, site.uptime_id, NOW - timedelta(minutes=5), None)
    data = await store.status_page("outages-00001", now=NOW)
    assert data is not None
    assert len(data.outages) == OUTAGES_SHOWN
    starts = [o.started_at for o in data.outages]
    assert starts == sorted(starts, reverse=True)
    ongoing = data.outages[0]
    assert ongoing.ended_at is None and ongoing.duration_seconds == 300
    assert data.outages[1].duration_seconds == 60
    assert data.outages[1].http_status_code == 503


async def test_response_times_are_24h_of_5_minute_buckets(store: Store) -> None:
    now = datetime(2026, 3, 10, 12, 2, 30, tzinfo=UTC)
    site = await seed_site(store.pool, now)
    data = await store.status_page(site.identifier, now=now)
    assert data is not None
    buckets = data.responses
    # 24 h of 5-minute buckets, the window's edges falling inside a bucket: 289 at most.
    assert 280 <= len(buckets) <= 289
    assert buckets[0].start >= now - timedelta(hours=24, minutes=5)
    assert all(b.start.minute % 5 == 0 and b.start.second == 0 for b in buckets)
    assert [b.start for b in buckets] == sorted(b.start for b in buckets)
    # Probes without a response and certificate probes are not response times.
    assert max(b.max_ms for b in buckets) < 300
    assert sum(b.samples for b in buckets) == 24 * 60 + 1
    full = buckets[-2]
    assert full.samples == 5


async def test_deleted_monitor_is_gone(store: Store) -> None:
    site = await seed_site(store.pool, NOW)
    assert await store.status_page(site.identifier, now=NOW) is not None
    await store.pool.execute("DELETE FROM monitors WHERE id = $1", site.monitor_id)
    assert await store.status_page(site.identifier, now=NOW) is None


@pytest.mark.parametrize(
    ("name", "sql", "args"),
    [
        ("monitor", public.SQL_MONITOR_BY_IDENTIFIER, ("x",)),
        ("days", public.SQL_DAILY_UPTIME, (1, NOW - timedelta(days=89), NOW, 90)),
        ("window", public.SQL_UPTIME_WINDOW, (1, NOW - timedelta(days=30), NOW)),
        ("responses", public.SQL_RESPONSE_BUCKETS, (1, NOW - timedelta(hours=24), NOW, 300)),
        ("outages", public.SQL_RECENT_OUTAGES, (1, 10)),
    ],
)
async def test_every_query_is_served_by_an_index(
    store: Store, name: str, sql: str, args: tuple[object, ...]
) -> None:
    """With sequential scans priced out, a table still read sequentially has no usable
    index for the query; on a public page that would be a scan per visitor."""
    async with store.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(
            r[0] for r in await conn.fetch("EXPLAIN " + sql, *args)
        )
    assert "Seq Scan" not in plan, f"{name}:\n{plan}"
