"""The naive baseline (a child role): one asyncio task per monitor, aiohttp GETs.

What a straightforward monitor would look like: every monitor is a task that sleeps until
its next due time and then GETs its URL with a shared ``aiohttp.ClientSession`` whose
connector never reuses a connection (``force_close=True``: a fresh connection per probe,
as the engine's probes make). It runs on uvloop like the engine, so the comparison is of the
design, not of the event loop. Due times follow the same stable phases as the engine
(``phase_fraction``), so both spread the same load over the interval; lateness is the
start of the request minus its due time. No database: the baseline's CPU per probe is a
lower bound of what such a design costs.

``baseline_inflight``: memory per in-flight HTTPS GET with that client, for comparison with
the engine's probes (``engine_run.inflight``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ssl
from array import array
from typing import Any

from upwatch_bench.child import emit, run_reporting
from upwatch_bench.layout import Ports, monitor_urls
from upwatch_bench.stats import cpu_seconds, rss_bytes, summary_ms


class _Tally:
    __slots__ = ("errors", "late", "probes", "recording")

    def __init__(self) -> None:
        self.recording = False
        self.probes = 0
        self.errors = 0
        self.late: array[float] = array("d")


async def _monitor(
    i: int, url: str, interval: float, start: float, session: Any, tally: _Tally,
    expect_ok: bool = True,
) -> None:
    from engine.scheduler.wheel import phase_fraction

    loop = asyncio.get_running_loop()
    due = start + phase_fraction(i + 1) * interval
    while True:
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        began = loop.time()
        ok = False
        try:
            async with session.get(url) as resp:
                await resp.read()
                ok = resp.status < 400
        except Exception:  # any failure is one failed probe
            ok = False
        if tally.recording:
            tally.probes += 1
            if ok != expect_ok:  # a failing site of the internet world must fail
                tally.errors += 1
            tally.late.append(began - due)
        due += interval
        now = loop.time()
        if due <= now:  # fell behind by a whole interval: skip to the next slot, like a timer
            due += ((now - due) // interval + 1) * interval


def _ssl_context(cafile: str | None) -> ssl.SSLContext | bool:
    if not cafile:
        return True
    return ssl.create_default_context(cafile=cafile)


async def _baseline(cfg: dict[str, Any]) -> None:
    import aiohttp

    urls = monitor_urls(cfg["monitors"], Ports.from_dict(cfg["ports"]), tls=cfg.get("tls", False),
                        mixed=cfg.get("mixed", False), names=bool(cfg.get("dns_server")))
    expect = [True] * len(urls)
    if cfg.get("world"):
        # The internet world (upwatch_bench/world.py): its URLs, and which must fail.
        from upwatch_bench.world import World

        sites = World.from_dict(cfg["world"]).sites()
        urls, expect = [s.url for s in sites], [s.healthy for s in sites]
    interval = float(cfg["interval_s"])
    extra: dict[str, Any] = {}
    if cfg.get("dns_server"):
        # aiohttp's default resolver (AsyncResolver: aiodns) and its default DNS cache
        # (10 s), pointed at the bench's DNS server.
        extra["resolver"] = aiohttp.AsyncResolver(nameservers=[cfg["dns_server"]])
    # The world's uptime probes do not verify certificates (the engine's do not either).
    tls: ssl.SSLContext | bool = False if cfg.get("world") else _ssl_context(cfg.get("cafile"))
    connector = aiohttp.TCPConnector(force_close=True, limit=cfg.get("limit", 1000),
                                     ssl=tls, **extra)
    timeout = aiohttp.ClientTimeout(total=cfg.get("timeout_s", 10.0))
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        gc.collect()
        rss_base = rss_bytes()
        tally = _Tally()
        start = loop.time() + 0.5
        tasks = [loop.create_task(_monitor(i, u, interval, start, session, tally, expect[i]))
                 for i, u in enumerate(urls)]
        try:
            await asyncio.sleep(0.3)  # every task created and parked in its first sleep
            rss_loaded = rss_bytes()
            emit("loaded", scheduled=len(tasks))
            await asyncio.sleep(cfg["warmup_s"])
            cpu0, t0 = cpu_seconds(), loop.time()
            tally.recording = True
            await asyncio.sleep(cfg["duration_s"])
            tally.recording = False
            cpu1, t1 = cpu_seconds(), loop.time()
            # Reported before the tasks are cancelled: an overloaded baseline can take long
            # to unwind thousands of requests, and the readings are already taken.
            emit(
                "result",
                scheduled=len(tasks),
                rss_base=rss_base,
                rss_loaded=rss_loaded,
                rss_end=rss_bytes(),
                seconds=t1 - t0,
                cpu_s=cpu1 - cpu0,
                probes=tally.probes,
                errors=tally.errors,
                lateness_ms=summary_ms(tally.late),
            )
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _inflight(cfg: dict[str, Any]) -> None:
    import aiohttp

    from upwatch_bench.roles.engine_run import settled_rss

    connector = aiohttp.TCPConnector(force_close=True, limit=0,
                                     ssl=_ssl_context(cfg.get("cafile")))
    timeout = aiohttp.ClientTimeout(total=cfg.get("timeout_s", 120.0))
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async def get(url: str) -> None:
            async with session.get(url) as resp:
                await resp.read()

        for u in cfg["warm_urls"]:
            with contextlib.suppress(Exception):
                await get(u)
        gc.collect()
        rss_before = await settled_rss(3.0, min_s=0.5)
        tasks = [asyncio.create_task(get(u)) for u in cfg["hang_urls"]]
        rss_during = await settled_rss(cfg.get("settle_max_s", 15.0), min_s=1.5)
        ended_early = sum(1 for t in tasks if t.done())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    k = len(tasks)
    emit("result", probes=k, rss_before=rss_before, rss_during=rss_during,
         bytes_per_probe=round((rss_during - rss_before) / k, 1) if k else None,
         ended_early=ended_early)


def run(cfg: dict[str, Any]) -> int:
    main = _baseline if cfg["role"] == "baseline" else _inflight
    return run_reporting(main(cfg))
