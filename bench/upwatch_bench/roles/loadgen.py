"""Load from another process (child roles).

``loadgen``
    An aiohttp HTTP load generator with keep-alive connections: ``concurrency`` workers
    request ``urls`` round-robin until ``duration_s`` has passed or ``max_requests`` were
    made. Reports requests per second, non-200 answers and latency percentiles. Used for the
    API's statistics latency (one worker: each request alone on the server) and for the
    API's throughput when ``wrk`` is not installed. With ``create_url_prefix`` every request
    is instead a ``POST`` to the first URL of a create body whose ``url`` is that prefix and
    a running number (every monitor new), plus ``create_fields``; success is a 201.

``producer``
    Queues webhook events at a steady ``rate`` per second the way the engine does: in a
    transaction, with :func:`engine.db.webhook_queue.insert_event` (row + NOTIFY), a small
    batch every 10 ms, over ``monitors`` monitors. Runs from ``start_wall`` until
    ``end_wall`` (wall clock, shared with the parent and the deliverer).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from array import array
from datetime import UTC, datetime
from typing import Any

from upwatch_bench.child import emit, run_reporting
from upwatch_bench.stats import cpu_seconds, summary_ms

PRODUCER_TICK = 0.01


async def _loadgen(cfg: dict[str, Any]) -> None:
    import aiohttp

    urls = list(cfg["urls"])
    headers = dict(cfg.get("headers") or {})
    concurrency = max(1, int(cfg.get("concurrency", 1)))
    max_requests = int(cfg.get("max_requests", 1_000_000))
    loop = asyncio.get_running_loop()
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=cfg.get("timeout_s", 30.0))
    latencies: array[float] = array("d")
    counts = {"requests": 0, "errors": 0}
    statuses: dict[int, int] = {}
    prefix = cfg.get("create_url_prefix")
    fields = dict(cfg.get("create_fields") or {})
    serial = itertools.count()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout,
                                     headers=headers) as session:
        async def one(url: str) -> None:
            t = time.perf_counter()
            try:
                if prefix is None:
                    async with session.get(url) as resp:
                        await resp.read()
                        status = resp.status
                else:
                    body = {"url": f"{prefix}{next(serial)}", **fields}
                    async with session.post(url, json=body) as resp:
                        await resp.read()
                        status = resp.status
            except Exception:  # a failed request is counted, not fatal
                status = 0
            latencies.append(time.perf_counter() - t)
            counts["requests"] += 1
            statuses[status] = statuses.get(status, 0) + 1
            if status != (200 if prefix is None else 201):
                counts["errors"] += 1

        for url in urls[: cfg.get("warmup_requests", 5)]:
            await one(url)
        latencies = array("d")
        counts.update(requests=0, errors=0)
        statuses.clear()
        cycle = itertools.cycle(urls)
        deadline = loop.time() + float(cfg["duration_s"])
        started = loop.time()
        cpu0 = cpu_seconds()

        async def worker() -> None:
            while loop.time() < deadline and counts["requests"] < max_requests:
                await one(next(cycle))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = loop.time() - started
        cpu = cpu_seconds() - cpu0
    emit(
        "result",
        requests=counts["requests"],
        errors=counts["errors"],
        statuses={str(k): v for k, v in statuses.items()},
        seconds=elapsed,
        rps=counts["requests"] / elapsed if elapsed > 0 else None,
        latency_ms=summary_ms(latencies),
        cpu_s=cpu,
    )


async def _producer(cfg: dict[str, Any]) -> None:
    from engine.db.store import Store
    from engine.db.webhook_queue import insert_event
    from engine.domain import payloads

    store = await Store.connect(cfg["dsn"], min_size=1, max_size=2)
    try:
        monitors = int(cfg["monitors"])
        rate = float(cfg["rate"])
        account_id = int(cfg["account_id"])
        now = datetime.now(UTC)
        bodies = [
            payloads.downtime(
                payloads.MonitorRef(m, f"http://127.0.1.{m % 100 + 1}/m/{m}", f"bench {m}"),
                last_check_at=now, error="HTTP 500", http_status_code=500,
                detected_by="local", verified_via="local",
            )
            for m in range(1, monitors + 1)
        ]
        loop = asyncio.get_running_loop()
        # Sleep until the shared start (wall clock), then pace on the monotonic clock.
        await asyncio.sleep(max(0.0, cfg["start_wall"] - time.time()))
        t0 = loop.time()
        end = t0 + (cfg["end_wall"] - cfg["start_wall"])
        queued = 0
        behind_max = 0
        monitor = itertools.cycle(range(monitors))
        while True:
            now_t = loop.time()
            if now_t >= end:
                break
            due = int(rate * (now_t - t0)) - queued
            behind_max = max(behind_max, due)
            if due > 0:
                n = min(due, max(1, int(rate * PRODUCER_TICK * 5)))
                async with store.pool.acquire() as conn, conn.transaction():
                    for _ in range(n):
                        m = next(monitor)
                        await insert_event(conn, account_id=account_id, monitor_id=m + 1,
                                           check_id=None, event=payloads.DOWNTIME,
                                           body=bodies[m])
                queued += n
            else:
                await asyncio.sleep(PRODUCER_TICK)
        emit("result", queued=queued, seconds=loop.time() - t0, behind_max=behind_max)
    finally:
        with contextlib.suppress(Exception):
            await store.close()


def run(cfg: dict[str, Any]) -> int:
    main = _loadgen if cfg["role"] == "loadgen" else _producer
    return run_reporting(main(cfg))
