"""GET /webapi/monitors/{id}/timings: where the probes' time went, per phase, from real
probes of real targets, and from hourly phase roll-ups across an hour boundary."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.rollups import PhaseRollup
from engine.db.store import Store
from engine.domain.timings import SQL_BUCKET, bucket_bounds, bucket_of, quantile
from engine.web.api.timings import check_slots
from tests.support.engine_support import add_monitor, fast_settings, fetch, fetchval, running_engine
from tests.support.targets import HttpTarget, TlsCerts, tls_target
from tests.support.wait import wait_until


def utc_midnight(ts: datetime) -> datetime:
    return ts.replace(hour=0, minute=0, second=0, microsecond=0)

PHASE_KEYS = ("dns_ms", "connect_ms", "tls_ms", "ttfb_ms", "total_ms")


async def _probes(store: Store, check_id: int) -> int:
    return int(await fetchval(
        store, "SELECT count(*) FROM probe_results WHERE check_id = $1 AND status_code = 200",
        check_id))


async def _timings(client: aiohttp.ClientSession, monitor_id: int, period: str = "24h") -> Any:
    async with client.get(f"/webapi/monitors/{monitor_id}/timings?period={period}") as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


def _busiest(body: dict[str, Any]) -> dict[str, Any]:
    """The slot with the most probes (a run may straddle an hour boundary)."""
    return max(body["timings"], key=lambda s: s["probes"])


@pytest.mark.serial  # measures phase timings (ttfb 190-240 ms, connect < 50 ms): run alone
async def test_a_slow_head_shows_as_ttfb_and_tls_as_its_own_phase(
    store: Store, account: tuple[Any, str], client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    acc, _ = account
    certs = TlsCerts(tmp_path)
    settings = fast_settings(tmp_path, ca_bundle=certs.ca_bundle, probe_timeout=5.0)
    async with HttpTarget() as slow, tls_target(certs, "valid") as secure:
        slow.delay = 0.2  # every response head comes 200 ms after the request
        slow_monitor, slow_check, _ = await add_monitor(store, acc.id, slow.url("/"))
        tls_monitor, tls_check, _ = await add_monitor(store, acc.id, secure.url("/"))
        async with running_engine(store, settings):
            async def enough() -> bool:
                return (await _probes(store, slow_check) >= 4
                        and await _probes(store, tls_check) >= 4)
            await wait_until(enough, timeout=20, what="four answered probes of each target")

    body = await _timings(client, slow_monitor)
    assert body["period"] == "24h" and body["resolution"] == "hour"
    assert len(body["timings"]) == 24
    slot = _busiest(body)
    assert slot["probes"] >= 4 and slot["responses"] >= 4
    ttfb = slot["ttfb_ms"]["p50"]
    assert 190 <= ttfb <= 240, slot  # 200 ms of waiting, read from 9%-wide buckets
    assert slot["total_ms"]["p50"] >= ttfb * 0.9
    assert slot["connect_ms"]["p50"] < 50
    assert slot["tls_ms"] == {"p50": None, "p95": None}  # plain HTTP has no TLS phase
    assert slot["dns_ms"] == {"p50": None, "p95": None}  # an IP address is not resolved
    # Hours without probes are there, empty.
    assert sum(s["probes"] for s in body["timings"]) == slot["probes"] + sum(
        s["probes"] for s in body["timings"] if s is not slot)
    empty = [s for s in body["timings"] if s["probes"] == 0]
    assert empty and all(s[k] == {"p50": None, "p95": None} for s in empty for k in PHASE_KEYS)

    tls = _busiest(await _timings(client, tls_monitor))
    assert tls["tls_ms"]["p50"] is not None and tls["tls_ms"]["p50"] > 0
    assert tls["tls_ms"]["p95"] >= tls["tls_ms"]["p50"]
    assert tls["ttfb_ms"]["p50"] < 150  # this target answers at once

    days = await _timings(client, slow_monitor, "7d")
    assert days["resolution"] == "day" and len(days["timings"]) == 7
    assert sum(s["probes"] for s in days["timings"]) == sum(
        s["probes"] for s in body["timings"])
    assert len((await _timings(client, slow_monitor, "30d"))["timings"]) == 30


async def test_bad_period_is_a_422_and_another_accounts_monitor_a_404(
    store: Store, account: tuple[Any, str], client: aiohttp.ClientSession
) -> None:
    acc, _ = account
    monitor_id, _, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/", notify=False)
    async with client.get(f"/webapi/monitors/{monitor_id}/timings?period=1y") as resp:
        assert resp.status == 422
        assert "period" in (await resp.json())["errors"]
    other, _ = await store.create_account("other")
    theirs, _, _ = await add_monitor(store, other.id, "http://127.0.0.1:9/", notify=False)
    async with client.get(f"/webapi/monitors/{theirs}/timings") as resp:
        assert resp.status == 404
    async with client.get("/webapi/monitors/999999999/timings") as resp:
        assert resp.status == 404


async def _insert(store: Store, check_id: int, at: datetime, ttfb: float, *,
                  status: int | None = 200, confirmation: bool = False) -> None:
    async with store.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO probe_results (check_id, at, kind, outcome, status_code, total_ms,"
            " dns_ms, connect_ms, tls_ms, ttfb_ms, region, confirmation)"
            " VALUES ($1, $2, 1, $3, $4, $5, 2.0, 1.0, NULL, $6, 'test', $7)",
            check_id, at, 0 if status else 2, status, ttfb + 3.0, ttfb, confirmation)


async def test_phase_rollups_across_an_hour_boundary_agree_with_the_raw_results(
    store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    _, check_id, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/", notify=False)
    now = datetime.now(UTC).replace(minute=30, second=0, microsecond=0)
    this_hour = now.replace(minute=0)
    last_hour = this_hour - timedelta(hours=1)
    async with store.pool.acquire() as conn:
        await conn.execute(
            "UPDATE phase_rollup_progress SET rolled_until = $1, days_rolled_until = $2",
            last_hour - timedelta(hours=1), utc_midnight(last_hour - timedelta(hours=1)))
    # 10 probes either side of the boundary, 100 ms before it and 300 ms after; one failed
    # probe (counted, no phases) and one confirmation probe (not counted) before it.
    for i in range(10):
        await _insert(store, check_id, this_hour - timedelta(minutes=5, seconds=-i * 30), 100.0)
        await _insert(store, check_id, this_hour + timedelta(seconds=i * 30), 300.0)
    await _insert(store, check_id, this_hour - timedelta(seconds=1), 5000.0, status=None)
    await _insert(store, check_id, this_hour - timedelta(seconds=2), 9000.0, confirmation=True)

    def hour_slots(slots: list[Any]) -> list[tuple[int, int, float | None, float | None]]:
        by_start = {s.start: s for s in slots}
        return [(s.probes, s.responses, s.phases["ttfb"]["p50"], s.phases["dns"]["p95"])
                for s in (by_start[last_hour], by_start[this_hour])]

    raw = hour_slots(await check_slots(store, check_id, "24h", now))
    assert raw[0][:2] == (11, 10) and raw[1][:2] == (10, 10)
    assert 92 <= (raw[0][2] or 0) <= 109 and 275 <= (raw[1][2] or 0) <= 327
    assert raw[0][3] is not None and 1.8 <= raw[0][3] <= 2.2

    # The job rolls the hours that ended ten minutes ago or more: the one before the
    # boundary (and the empty one before it), not the current one.
    assert await store.roll_phase_timings(now, grace=timedelta(minutes=10)) == 2
    assert await fetchval(store, "SELECT rolled_until FROM phase_rollup_progress") == this_hour
    assert await fetchval(
        store, "SELECT probes FROM check_phase_rollups_hourly WHERE check_id = $1 AND hour = $2",
        check_id, last_hour) == 11
    assert hour_slots(await check_slots(store, check_id, "24h", now)) == raw
    assert await store.roll_phase_timings(now, grace=timedelta(minutes=10)) == 0

    later = this_hour + timedelta(hours=1, minutes=11)
    assert await store.roll_phase_timings(later, grace=timedelta(minutes=10)) == 1
    assert hour_slots(await check_slots(store, check_id, "24h", later)) == raw
    # Days add the hours' histograms up (one day or two, if the boundary is midnight).
    days = [(s.start, s.probes, s.responses, s.phases)
            for s in await check_slots(store, check_id, "7d", later) if s.probes]
    assert sum(d[1] for d in days) == 21
    if len(days) == 1:
        assert 92 <= (days[0][3]["ttfb"]["p50"] or 0) <= 327

    # Once the day is over it is summed into a daily row, and read from there the same. An
    # hour past the next midnight: between 23:00 and 24:00 UTC, ``later`` is that midnight
    # plus 11 minutes and has rolled the day already, so a roll then would find nothing.
    next_day = utc_midnight(this_hour) + timedelta(days=1, hours=1, minutes=11)
    assert await store.roll_phase_timings(next_day, grace=timedelta(minutes=10)) >= 1
    assert await fetchval(store, "SELECT days_rolled_until FROM phase_rollup_progress") == (
        utc_midnight(next_day))
    assert await fetchval(
        store, "SELECT sum(probes) FROM check_phase_rollups_daily WHERE check_id = $1",
        check_id) == 21
    from_days = [(s.start, s.probes, s.responses, s.phases)
                 for s in await check_slots(store, check_id, "7d", next_day) if s.probes]
    assert from_days == days


def test_quantiles_from_the_buckets_are_within_their_width() -> None:
    for value in (0.1, 0.3, 1.0, 7.5, 200.0, 1234.5, 30000.0):
        k = bucket_of(value)
        low, high = bucket_bounds(k)
        assert low <= value < high or (k == 0 and value < high)
        estimate = quantile({k: 10}, 0.5)
        assert estimate is not None and low <= estimate <= high
        if k:
            assert abs(estimate - value) / value < 0.2
    # 90 fast and 10 slow probes: p50 is fast, p95 slow.
    hist = {bucket_of(20.0): 90, bucket_of(800.0): 10}
    assert 18 <= (quantile(hist, 0.5) or 0) <= 23
    assert 700 <= (quantile(hist, 0.95) or 0) <= 900
    assert quantile({}, 0.5) is None


async def test_the_sql_buckets_are_the_python_buckets(store: Store) -> None:
    values = [0.0, 0.1, 0.25, 0.3, 1.0, 2.5, 7.5, 199.9, 200.0, 1234.5, 30000.0, 1e9]
    sql = "SELECT " + SQL_BUCKET.format(ms="v") + " FROM unnest($1::real[]) AS t(v)"
    got = [r[0] for r in await fetch(store, sql, values)]
    assert got == [bucket_of(v) for v in values]
    assert await fetchval(store, "SELECT " + SQL_BUCKET.format(ms="NULL::real")) is None


async def test_the_job_rolls_each_hour_once_even_with_two_nodes_at_it(
    store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    _, check_id, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/", notify=False)
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = this_hour - timedelta(hours=6)
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE phase_rollup_progress SET rolled_until = $1,"
                           " days_rolled_until = $2", start, utc_midnight(start))
    for h in range(6):
        await _insert(store, check_id, start + timedelta(hours=h, minutes=7), 50.0 + h)
    later = this_hour + timedelta(minutes=11)
    done = await asyncio.gather(*(
        store.roll_phase_timings(later, grace=timedelta(minutes=10)) for _ in range(3)))
    assert sum(done) == 6 and sorted(done)[-1] == 6  # one of them did it all
    assert await fetchval(store, "SELECT rolled_until FROM phase_rollup_progress") == this_hour
    assert await fetchval(
        store, "SELECT sum(probes) FROM check_phase_rollups_hourly WHERE check_id = $1",
        check_id) == 6


async def test_the_rollup_component_runs_until_stopped(
    store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    await add_monitor(store, acc.id, "http://127.0.0.1:9/", notify=False)
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE phase_rollup_progress SET rolled_until = $1",
                           this_hour - timedelta(hours=3))
    stop = asyncio.Event()
    task = asyncio.create_task(PhaseRollup(store, interval=3600).run(stop))

    async def caught_up() -> bool:
        rolled = await fetchval(store, "SELECT rolled_until FROM phase_rollup_progress")
        return bool(rolled >= this_hour - timedelta(hours=1))
    await wait_until(caught_up, timeout=10, what="the job to roll the ended hours")
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_a_catch_up_over_several_passes_is_logged_once(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """A new database starts rolling a week back: its first start said "24 hours rolled up"
    once a second, seven times, under the "ready" line. Now one line, with the total."""
    caplog.set_level(logging.INFO, logger="engine.db.rollups")
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = this_hour - timedelta(hours=50)  # two full passes of 24 hours and a short one
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE phase_rollup_progress SET rolled_until = $1", start)
    stop = asyncio.Event()
    task = asyncio.create_task(PhaseRollup(store, interval=3600).run(stop))

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.name == "engine.db.rollups" and r.levelno >= logging.INFO]

    async def logged() -> bool:
        return bool(lines())

    try:
        await wait_until(logged, timeout=15, what="the catch-up's log line")
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
    rolled = await fetchval(store, "SELECT rolled_until FROM phase_rollup_progress")
    hours = int((rolled - start) / timedelta(hours=1))
    assert hours >= 49  # up to the last hour ended 10 minutes ago
    assert lines() == [f"phase timings: {hours} hours rolled up"]


async def test_a_new_host_starts_its_timings_afresh(
    store: Store, client: aiohttp.ClientSession
) -> None:
    async with client.post("/webapi/monitors", json={"url": "http://127.0.0.1:9/",
                                                      "alias": "old"}) as resp:
        assert resp.status == 201, await resp.text()
        monitor = await resp.json()
    check_id = monitor["checks"]["uptime"]["id"]
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    async with store.pool.acquire() as conn:
        await conn.execute(
            "UPDATE phase_rollup_progress SET rolled_until = $1, days_rolled_until = $2",
            this_hour - timedelta(days=3), utc_midnight(this_hour - timedelta(days=3)))
    for h in range(1, 30):
        await _insert(store, check_id, this_hour - timedelta(hours=h), 80.0)
    await store.roll_phase_timings(this_hour + timedelta(minutes=11),
                                   grace=timedelta(minutes=10), max_hours=100)
    body = await _timings(client, monitor["id"], "7d")
    assert sum(s["probes"] for s in body["timings"]) == 29
    async with client.put(f"/webapi/monitors/{monitor['id']}",
                          json={"url": "http://127.0.0.2:9/"}) as resp:
        assert resp.status == 200, await resp.text()
    for period in ("24h", "7d", "30d"):
        body = await _timings(client, monitor["id"], period)
        assert sum(s["probes"] for s in body["timings"]) == 0, period
