"""Probe results reach probe_results (COPY) and the hourly rollups; batched check updates
never undo newer state and respect the API's config_version fence."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, cast

import asyncpg
import pytest

from engine.db.store import Store
from engine.kinds.scheduled import Touch
from engine.runtime.metrics import Metrics
from engine.scheduler.results import ResultsWriter
from tests.support.engine_support import (
    add_monitor,
    check_row,
    fast_settings,
    fetch,
    fetchval,
    running_engine,
    wait_status,
)
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until


async def test_results_and_rollups_are_written(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, region="here")
    async with HttpTarget() as site:
        _, ok_id, _ = await add_monitor(store, acc.id, site.url("/"))
        _, nf_id, _ = await add_monitor(store, acc.id, site.url("/status/404"))
        async with running_engine(store, settings):
            await wait_status(store, ok_id, "ok")
            await wait_status(store, nf_id, "degraded")

            async def enough() -> bool:
                n = await fetchval(
                    store, "SELECT count(*) FROM probe_results WHERE check_id = $1", ok_id)
                return n >= 4

            await wait_until(enough, what="several results")
    rows = await fetch(store, "SELECT * FROM probe_results WHERE check_id = ANY($1::bigint[])",
                       [ok_id, nf_id])
    for r in rows:
        assert r["kind"] == 1 and r["region"] == "here" and r["confirmation"] is False
        assert r["total_ms"] > 0 and r["connect_ms"] is not None and r["ttfb_ms"] is not None
        assert r["dns_ms"] is None  # an IP literal is not resolved
        assert r["error"] is None
        if r["check_id"] == ok_id:
            assert (r["outcome"], r["status_code"]) == (0, 200)
        else:
            assert (r["outcome"], r["status_code"]) == (1, 404)
    for check_id in (ok_id, nf_id):
        mine = [r for r in rows if r["check_id"] == check_id]
        roll = await fetch(
            store, "SELECT * FROM check_rollups_hourly WHERE check_id = $1", check_id)
        assert sum(x["probes"] for x in roll) == len(mine)
        assert sum(x["responses"] for x in roll) == len(mine)
        assert sum(x["failures"] for x in roll) == 0
        assert sum(x["response_ms_sum"] for x in roll) == pytest.approx(
            sum(r["total_ms"] for r in mine), rel=1e-4)
        assert max(x["response_ms_max"] for x in roll) == pytest.approx(
            max(r["total_ms"] for r in mine), rel=1e-4)
        assert all(x["hour"].minute == 0 and x["hour"].second == 0 for x in roll)
        # The checks row carries the last probe (batched writes included).
        row = await check_row(store, check_id)
        last = max(r["at"] for r in mine)
        assert row["last_check_at"] == last


def _row(check_id: int, at: datetime, outcome: int = 0, code: int | None = 200,
         ms: float = 10.0, confirmation: bool = False) -> tuple[Any, ...]:
    return (check_id, at, 1, outcome, code, ms, None, 1.0, None, 2.0, "local", confirmation,
            None if code else "connection refused")


async def test_batch_skips_rollups_of_deleted_checks_and_aggregates_per_hour(
    store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    _, check_id, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/")
    h = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    rows = [
        _row(check_id, h + timedelta(minutes=1), ms=10.0),
        _row(check_id, h + timedelta(minutes=2), ms=30.0),
        _row(check_id, h + timedelta(minutes=3), outcome=2, code=None, ms=5.0),
        _row(check_id, h + timedelta(minutes=3, seconds=1), outcome=2, code=None,
             confirmation=True),
        _row(check_id, h + timedelta(hours=1, minutes=5), ms=20.0),
        _row(987654, h, ms=1.0),  # a check deleted meanwhile
    ]
    await store.write_results(rows, {})
    # A second batch adds to the same hour.
    more = [_row(check_id, h + timedelta(minutes=40), ms=50.0)]
    await store.write_results(more, {})
    roll = await fetch(store, "SELECT * FROM check_rollups_hourly ORDER BY check_id, hour")
    assert [(r["check_id"], r["hour"], r["probes"], r["responses"], r["failures"],
             r["response_ms_sum"], r["response_ms_max"]) for r in roll] == [
        (check_id, h, 4, 3, 1, 90.0, 50.0),
        (check_id, h + timedelta(hours=1), 1, 1, 0, 20.0, 20.0),
    ]
    assert await fetchval(store, "SELECT count(*) FROM probe_results") == 7


async def test_batched_check_updates_are_fenced(store: Store, account: tuple[Any, str]) -> None:
    acc, _ = account
    _, check_id, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/")
    t1 = datetime.now(UTC)
    t0 = t1 - timedelta(seconds=5)
    newer = Touch(1, t1, "degraded", "HTTP 404", {"http_status_code": 404})
    await store.write_results([], {check_id: newer})
    row = await check_row(store, check_id)
    assert (row["status"], row["error"], row["meta"], row["last_check_at"]) == (
        "degraded", "HTTP 404", {"http_status_code": 404}, t1)
    assert row["state_version"] == 1
    # Older than what the row holds: ignored.
    older = Touch(1, t0, "ok", None, {"http_status_code": 200})
    await store.write_results([], {check_id: older})
    assert (await check_row(store, check_id))["status"] == "degraded"
    # Under a config_version the API has moved past: ignored.
    stale = Touch(0, t1 + timedelta(seconds=1), "ok", None, {"http_status_code": 200})
    await store.write_results([], {check_id: stale})
    assert (await check_row(store, check_id))["status"] == "degraded"


async def test_rollups_count_scheduled_uptime_probes_only(
    store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    _, check_id, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/")
    h = datetime(2026, 3, 1, 10, 30, tzinfo=UTC)
    rows = [
        _row(check_id, h, ms=1.0),
        _row(check_id, h, outcome=2, code=None, ms=3.0),
        _row(check_id, h, outcome=2, code=None, ms=3.0, confirmation=True),
        (check_id, h, 2, 0, None, 9.0, None, None, None, None, "local", False, None),
    ]
    await store.write_results(rows, {})
    roll = await fetch(store, "SELECT * FROM check_rollups_hourly")
    assert [(r["hour"], r["probes"], r["responses"], r["failures"], r["response_ms_sum"],
             r["response_ms_max"]) for r in roll] == [(h.replace(minute=0), 2, 1, 1, 1.0, 1.0)]
    assert await fetchval(store, "SELECT count(*) FROM probe_results") == 4


async def test_results_writer_takes_a_new_connection_when_its_own_dies(
    store: Store, account: tuple[Any, str], db_dsn: str
) -> None:
    acc, _ = account
    _, check_id, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/")
    h = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    w = ResultsWriter(store, metrics=Metrics(), limit=100, flush_interval=60)
    try:
        await _write_across_a_lost_connection(w, check_id, h, db_dsn)
    finally:
        await w.aclose()  # the pool can close: the connection went back
    roll = await fetch(store, "SELECT probes, response_ms_sum FROM check_rollups_hourly")
    assert [(r["probes"], r["response_ms_sum"]) for r in roll] == [(2, 30.0)]
    assert await fetchval(store, "SELECT count(*) FROM probe_results") == 2
    assert (await check_row(store, check_id))["last_check_at"] == h + timedelta(minutes=1)
    # Nothing of the session is left on the pooled connections.
    assert await fetchval(
        store, "SELECT count(*) FROM pg_class WHERE relname LIKE '%staging'") == 0


async def _write_across_a_lost_connection(
    w: ResultsWriter, check_id: int, h: datetime, db_dsn: str
) -> None:
    w.offer(_row(check_id, h, ms=10.0))
    assert await w.flush_once()
    # Every other backend of this database goes, the writer's held connection among them.
    killer = await asyncpg.connect(db_dsn)
    try:
        await killer.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()")
    finally:
        await killer.close()
    w.offer(_row(check_id, h + timedelta(minutes=1), ms=20.0))
    w.touch(check_id, Touch(1, h + timedelta(minutes=1), "ok", None, {"http_status_code": 200}))
    # The first try may meet the dead connection (batch put back); the next one writes.
    if not await w.flush_once():
        assert w.depth == 1
        assert await w.flush_once()
    assert not w.in_outage and w.depth == 0


async def test_times_are_written_to_the_microsecond(
    store: Store, account: tuple[Any, str]
) -> None:
    """Times are staged as integers (microseconds since the epoch) and turned back in SQL:
    every value comes back exactly, in probe_results, the rollup hour and last_check_at,
    whatever the time zone the datetime was made in."""
    acc, _ = account
    _, check_id, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/")
    east = timezone(timedelta(hours=5, minutes=30))
    ats = [
        datetime(2026, 3, 1, 10, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 3, 1, 11, 0, 0, 1, tzinfo=UTC),
        datetime(2026, 3, 1, 16, 30, 0, 123_457, tzinfo=east),  # 11:00:00.123457 UTC
        datetime(2099, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    ]
    rows = [_row(check_id, at, ms=1.0) for at in ats]
    last = ats[-1]
    await store.write_results(
        rows, {check_id: Touch(1, last, "ok", None, {"http_status_code": 200})})
    got = await fetch(store, "SELECT at FROM probe_results ORDER BY at")
    assert [r["at"] for r in got] == sorted(ats)
    roll = await fetch(store, "SELECT hour, probes FROM check_rollups_hourly ORDER BY hour")
    assert [(r["hour"], r["probes"]) for r in roll] == [
        (datetime(2026, 3, 1, 10, tzinfo=UTC), 1),
        (datetime(2026, 3, 1, 11, tzinfo=UTC), 2),
        (datetime(2099, 12, 31, 23, tzinfo=UTC), 1),
    ]
    assert (await check_row(store, check_id))["last_check_at"] == last


async def test_touches_with_and_without_their_rows_in_the_batch(
    store: Store, account: tuple[Any, str]
) -> None:
    """A touch rides on its own row when that row is in the batch; one whose row is not
    (written earlier, dropped in an outage) or is older than the batch's row of its check
    is written all the same, and neither adds a probe_results row or a rollup probe."""
    acc, _ = account
    ids = [(await add_monitor(store, acc.id, f"http://127.0.0.1:9/{i}"))[1] for i in range(4)]
    a, b, c, d = ids
    h = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    t1, t2 = h + timedelta(minutes=1), h + timedelta(minutes=2)
    same = datetime(2026, 3, 1, 10, 2, tzinfo=UTC)  # equal to t2, another object
    rows = [
        _row(a, t1, ms=10.0), _row(a, t2, ms=20.0),  # a's touch is its second row's
        _row(b, t2, ms=30.0),  # b's touch is from an earlier probe (t1)
        _row(c, same, ms=40.0),  # c's touch has an equal time in another object
    ]
    touches = {
        a: Touch(1, t2, "ok", None, {"http_status_code": 200}),
        b: Touch(1, t1, "degraded", "HTTP 404", {"http_status_code": 404}),
        c: Touch(1, t2, "ok", None, {"http_status_code": 200}),
        d: Touch(1, t1, "degraded", "slow", {"http_status_code": 200}),  # no row at all
    }
    before = dict(touches)
    await store.write_results(rows, touches)
    assert touches == before  # the caller's mapping is left alone (it may be put back)
    got = await fetch(store, "SELECT check_id, at, total_ms FROM probe_results"
                             " ORDER BY check_id, at")
    assert [(r["check_id"], r["at"], r["total_ms"]) for r in got] == [
        (a, t1, 10.0), (a, t2, 20.0), (b, t2, 30.0), (c, t2, 40.0)]
    roll = await fetch(store, "SELECT check_id, probes FROM check_rollups_hourly"
                              " ORDER BY check_id")
    assert [(r["check_id"], r["probes"]) for r in roll] == [(a, 2), (b, 1), (c, 1)]
    want = {a: ("ok", None, 200, t2), b: ("degraded", "HTTP 404", 404, t1),
            c: ("ok", None, 200, t2), d: ("degraded", "slow", 200, t1)}
    for check_id, (status, error, code, at) in want.items():
        row = await check_row(store, check_id)
        assert (row["status"], row["error"], row["meta"], row["last_check_at"],
                row["state_version"]) == (status, error, {"http_status_code": code}, at, 1)


async def test_a_refused_batch_writes_nothing_and_leaves_nothing_staged(
    store: Store, account: tuple[Any, str]
) -> None:
    """A batch the server refuses, in its COPY or in the statements after it, writes none
    of its rows, rollups or touches; the session's next batch writes exactly its own."""
    acc, _ = account
    _, check_id, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/")
    h = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    session = store.results_session()
    try:
        # Refused by the COPY: text PostgreSQL cannot hold (a NUL character).
        bad_value = [_row(check_id, h, ms=1.0),
                     (*_row(check_id, h, code=None)[:-1], "refused\x00")]
        with pytest.raises(asyncpg.PostgresError):
            await session.write(bad_value, {})
        # Refused after it: a status the checks table does not allow.
        bad_touch = {check_id: Touch(1, h, "bogus", None, {})}
        with pytest.raises(asyncpg.CheckViolationError):
            await session.write([_row(check_id, h, ms=2.0)], bad_touch)
        good = Touch(1, h + timedelta(minutes=1), "ok", None, {"http_status_code": 200})
        await session.write([_row(check_id, h + timedelta(minutes=1), ms=3.0)],
                            {check_id: good})
    finally:
        await session.close()
    got = await fetch(store, "SELECT total_ms FROM probe_results")
    assert [r["total_ms"] for r in got] == [3.0]
    roll = await fetch(store, "SELECT probes, response_ms_sum FROM check_rollups_hourly")
    assert [(r["probes"], r["response_ms_sum"]) for r in roll] == [(1, 3.0)]
    row = await check_row(store, check_id)
    assert (row["status"], row["last_check_at"], row["state_version"]) == (
        "ok", h + timedelta(minutes=1), 1)


async def test_staged_times_do_not_depend_on_the_session_time_zone(store: Store) -> None:
    """The expression that turns a staged interval back into a time gives the same instant
    in a session whose time zone has daylight saving time (the pool's sessions are UTC)."""
    from engine.db.results import SQL_AT

    at = datetime(2026, 7, 1, 12, 34, 56, 789_012, tzinfo=UTC)
    since = at - datetime(1970, 1, 1, tzinfo=UTC)
    async with store.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL timezone = 'America/New_York'")
        got = await conn.fetchval(
            f"SELECT {SQL_AT.format(t='s')} FROM (SELECT $1::interval AS since_epoch) s",
            since)
    assert got == at


class _CancelledOnce:
    """The store's own results session, except that its first write meets a cancellation
    from inside (as asyncpg can let out when the server cuts a connection)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.cancelled = 0

    def results_session(self) -> Any:
        real = self._store.results_session()
        outer = self

        class Session:
            async def write(self, rows: Any, touches: Any) -> None:
                if not outer.cancelled:
                    outer.cancelled += 1
                    raise asyncio.CancelledError
                await real.write(rows, touches)

            async def close(self) -> None:
                await real.close()

        return Session()


async def test_a_cancellation_from_inside_a_write_loses_no_result(
    store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    _, check_id, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/")
    h = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    faulty = _CancelledOnce(store)
    w = ResultsWriter(cast(Any, faulty), metrics=Metrics(), limit=100, flush_interval=0.05)
    stop = asyncio.Event()
    writer = asyncio.create_task(w.run(stop))
    w.offer(_row(check_id, h))
    w.offer(_row(check_id, h + timedelta(minutes=1)))
    await wait_until(lambda: fetchval(store, "SELECT count(*) FROM probe_results"),
                     what="the results written after the cancellation")
    stop.set()
    await asyncio.wait_for(writer, 10)  # it went on and stopped cleanly: not cancelled
    assert faulty.cancelled == 1
    assert await fetchval(store, "SELECT count(*) FROM probe_results") == 2
