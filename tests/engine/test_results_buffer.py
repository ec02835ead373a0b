"""The results buffer without a database: back-pressure while the database is slow, drop the
oldest while it is gone, retry with back-off, coalesced check updates, drain on stop."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from engine.kinds.scheduled import Touch
from engine.runtime.errors import DatabaseUnavailable
from engine.runtime.metrics import Metrics
from engine.scheduler.results import ResultRow, ResultsWriter
from tests.support.metrics import sample

AT = datetime(2026, 3, 1, 10, 30, tzinfo=UTC)


def row(i: int) -> ResultRow:
    return (i, AT, 1, 0, 200, 1.0, None, None, None, None, "local", False, None)


class FakeStore:
    def __init__(self) -> None:
        self.batches: list[list[ResultRow]] = []
        self.touches: list[dict[int, Touch]] = []
        self.down = False
        self.refuse = 0
        self.gate: asyncio.Event | None = None
        self.calls = 0
        self.closed = 0

    def results_session(self) -> FakeStore:
        return self

    async def close(self) -> None:
        self.closed += 1

    async def write(self, rows: Any, touches: dict[int, Touch]) -> None:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise DatabaseUnavailable("connection refused")
        if self.refuse:
            self.refuse -= 1
            raise ValueError("refused")
        self.batches.append(list(rows))
        self.touches.append(dict(touches))

    @property
    def written(self) -> list[int]:
        return [r[0] for b in self.batches for r in b]


def writer(store: FakeStore, metrics: Metrics, limit: int = 100, batch: int = 10) -> ResultsWriter:
    return ResultsWriter(store, metrics=metrics, limit=limit, flush_interval=0.01,
                         batch_rows=batch, drain_timeout=1.0)


async def test_rows_are_written_in_order_in_batches() -> None:
    store, metrics = FakeStore(), Metrics()
    w = writer(store, metrics)
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    for i in range(35):
        await w.put(row(i))
    while len(store.written) < 35:
        await asyncio.sleep(0.005)
    stop.set()
    await task
    assert store.written == list(range(35))
    assert max(len(b) for b in store.batches) <= 10
    assert sample(metrics, "upwatch_results_written_total") == 35


async def test_full_buffer_applies_back_pressure_while_the_database_is_healthy() -> None:
    store, metrics = FakeStore(), Metrics()
    store.gate = asyncio.Event()  # the database is slow: the first write hangs
    w = writer(store, metrics, limit=100, batch=50)
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    for i in range(100):
        await w.put(row(i))
    blocked = asyncio.create_task(w.put(row(100)))
    await asyncio.sleep(0.05)
    assert not blocked.done()  # waits for space instead of growing
    assert w.depth == 100
    store.gate.set()
    await asyncio.wait_for(blocked, 2)
    stop.set()
    await task
    assert store.written == list(range(101))
    assert sample(metrics, "upwatch_results_dropped_total") == 0


async def test_outage_keeps_probing_drops_oldest_and_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, metrics = FakeStore(), Metrics()
    store.down = True
    w = writer(store, metrics, limit=100, batch=50)
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    await w.put(row(0))
    while not w.in_outage:
        await asyncio.sleep(0.005)
    # Puts never block during the outage; the oldest rows make room.
    for i in range(1, 150):
        await asyncio.wait_for(w.put(row(i)), 0.5)
    assert w.depth <= 100
    assert sample(metrics, "upwatch_results_dropped_total") == 50
    assert any("dropped the" in r.getMessage() for r in caplog.records)
    store.down = False
    while len(store.written) < 100:
        await asyncio.sleep(0.01)
    stop.set()
    await task
    assert store.written == list(range(50, 150))
    assert not w.in_outage


async def test_a_refused_batch_is_retried_then_given_up() -> None:
    store, metrics = FakeStore(), Metrics()
    store.refuse = 1
    w = writer(store, metrics)
    await w.put(row(1))
    assert await w.flush_once() is False
    assert await w.flush_once() is True
    assert store.written == [1]
    store.refuse = 10
    await w.put(row(2))
    results = [await w.flush_once() for _ in range(3)]
    assert results == [False, False, False]
    assert w.depth == 0 and sample(metrics, "upwatch_results_dropped_total") == 1


async def test_touches_coalesce_per_check_and_survive_a_failed_write() -> None:
    store, metrics = FakeStore(), Metrics()
    w = writer(store, metrics)
    t1 = Touch(1, AT, "ok", None, {})
    t2 = Touch(1, AT, "degraded", "HTTP 404", {})
    w.touch(7, t1)
    w.touch(7, t2)
    w.touch(8, t1)
    store.down = True
    assert await w.flush_once() is False
    t3 = Touch(1, AT, "ok", None, {"x": 1})
    w.touch(8, t3)  # newer than the one that failed: it wins
    store.down = False
    assert await w.flush_once() is True
    assert store.touches[-1] == {7: t2, 8: t3}
    w.touch(9, t1)
    w.forget(9)
    assert await w.flush_once() is True
    assert len(store.touches) == 1


async def test_stop_drains_within_the_limit() -> None:
    store, metrics = FakeStore(), Metrics()
    w = ResultsWriter(store, metrics=metrics, limit=1000, flush_interval=60, batch_rows=400,
                      drain_timeout=1.0)
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    for i in range(250):
        await w.put(row(i))
    stop.set()
    await asyncio.wait_for(task, 2)
    assert store.written == list(range(250))
    assert store.closed == 1  # the writer's connection went back


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_stop_gives_up_after_the_drain_limit_when_the_database_is_gone() -> None:
    store, metrics = FakeStore(), Metrics()
    store.down = True
    w = ResultsWriter(store, metrics=metrics, limit=1000, flush_interval=60,
                      drain_timeout=0.2)
    await w.put(row(1))
    stop = asyncio.Event()
    stop.set()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await asyncio.wait_for(w.run(stop), 2)
    assert loop.time() - t0 < 1.0
    assert w.depth == 1
