"""Child roles that run the real engine components under measurement.

``engine``
    :class:`engine.scheduler.engine.Engine` exactly as the daemon builds it (real probes,
    state machine, results writer, store), over the bench database. Readings:

    * RSS before the engine exists (imports, pool, settings done) and after its first load,
      per scheduled check; again at the end of the window.
    * Over the measured window (after a warm-up): user+sys CPU of this process, probes by
      kind and outcome (the engine's own ``upwatch_probes_total``), rows the results writer
      committed, and every scheduler lateness sample. The samples come from a stand-in for
      ``metrics.lateness`` (:class:`LatenessRecorder`) that forwards each observation to the
      real histogram, so the engine does the same work it does in production; nothing in
      the engine is changed or patched.
    * The cyclic GC's collections and their time over the window (``gc.callbacks``).
    * Optionally, the capacity of the results path: the engine's own ResultsWriter fed as
      fast as one core allows, rows committed per second; and a cProfile of the window.

``inflight``
    Memory per in-flight HTTPS uptime probe: the engine's HttpProber holding K probes open
    against a TLS target that completes the handshake and never answers.

``deliverer``
    :class:`engine.delivery.webhooks.deliverer.Deliverer` over the bench database; the parent takes
    readings with ``mark`` commands (CPU and delivered count at that moment).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
from array import array
from datetime import UTC, datetime
from typing import Any, cast

from upwatch_bench.child import commands, emit, run_reporting
from upwatch_bench.engine_parts import (
    build_engine,
    build_http_prober,
    close_engine,
    http_prober_of,
    resolver_of,
    scheduled_hosts,
    watch_loaded,
)
from upwatch_bench.stats import cpu_seconds, cpu_split, rss_bytes, summary_ms
from upwatch_bench.tracers import callgrind

LATENESS_CAP = 5_000_000  # samples kept (40 MB): far more than any bounded run produces


class LatenessRecorder:
    """Stands in for ``Metrics.lateness``: every observation goes to the real histogram, and
    while ``recording`` the raw value is kept too (bounded by ``cap``).

    Like the real histogram's, ``observe`` is an append (here to an array): a Python method
    would add a frame to every probe the bench measures. Values reach the histogram and the
    samples when the engine folds its metrics (once a second) and whenever ``recording``
    changes, so a window's samples are exactly the ones observed in it.
    """

    def __init__(self, histogram: Any, cap: int = LATENESS_CAP) -> None:
        self._histogram = histogram
        self._cap = cap
        self._fresh: array[float] = array("d")
        self.observe = self._fresh.append
        self.samples: array[float] = array("d")
        self._recording = False

    @property
    def recording(self) -> bool:
        return self._recording

    @recording.setter
    def recording(self, on: bool) -> None:
        self.fold()  # what came before the change belongs to the state before it
        self._recording = on

    def fold(self) -> None:
        fresh = self._fresh
        if fresh:
            self._histogram.observe_many(fresh)
            if self._recording:
                room = self._cap - len(self.samples)
                if room > 0:
                    self.samples.extend(fresh[:room])
            del fresh[:]
        self._histogram.fold()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._histogram, name)


class GcTimer:
    """Counts and times the cyclic GC's collections per generation while ``on`` (a
    ``gc.callbacks`` entry: a reading of what the interpreter does anyway)."""

    def __init__(self) -> None:
        self.on = False
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.collected = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self.on:
            g = info["generation"]
            self.collections[g] += 1
            self.seconds[g] += time.perf_counter() - self._started
            self.collected += info["collected"]

    def to_dict(self, seconds: float) -> dict[str, Any]:
        return {
            "collections": self.collections,
            "ms": [round(x * 1000, 1) for x in self.seconds],
            "cpu_share": round(sum(self.seconds) / seconds, 4) if seconds > 0 else None,
            "objects_collected": self.collected,
            "thresholds": list(gc.get_threshold()),
        }


def _cprofile_start(cfg: dict[str, Any]) -> Any:
    """With ``cprofile`` in the config (--cprofile): a deterministic profile of
    the measured window. It slows the process down (about 2x for Python code), so the run's
    figures are not to be quoted; the call counts and the split between functions are."""
    if not cfg.get("cprofile"):
        return None
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    return profiler


def _cprofile_stop(profiler: Any, cfg: dict[str, Any]) -> None:
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(cfg["cprofile"])


def _counter_values(counter: Any) -> dict[str, float]:
    """``{"label=value,...": count}`` of a labelled Prometheus counter."""
    out: dict[str, float] = {}
    for family in counter.collect():
        for s in family.samples:
            if s.name.endswith("_total"):
                out[",".join(f"{v}" for v in s.labels.values())] = s.value
    return out


def answered(probes: dict[str, float]) -> float:
    """Probes that got an answer (outcome ok or degraded) in ``{"kind,outcome": count}``;
    failures (time-outs among them) are not: under callgrind a probe that timed out in the
    engine's queue costs little and says nothing of what an answered one costs."""
    return sum(v for k, v in probes.items() if k.rpartition(",")[2] in ("ok", "degraded"))


async def _in_flight_during(engine: Any, seconds: float) -> tuple[float | None, int | None]:
    """Sleep ``seconds`` while reading the engine's probes in flight four times a second:
    (mean, max) of the readings (like with like: names against literals at capacity)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    seen: list[int] = []
    while True:
        left = end - loop.time()
        if left <= 0:
            break
        await asyncio.sleep(min(0.25, left))
        seen.append(engine.in_flight)
    if not seen:
        return None, None
    return round(sum(seen) / len(seen), 1), max(seen)


async def _prewarm(resolver: Any, engine: Any, at_once: int = 200) -> None:
    """Look every scheduled check's host name up before the window (``bench --names-cost``
    at a rate lower than the monitors at 30 s: its probes would otherwise meet names not yet
    asked for, and the window would count lookups, not the cached steady state). At most
    ``at_once`` lookups in flight, as the bench's DNS server answers a few thousand a
    second; bounded by the lookups' own time-outs."""
    from engine.probes.addresses import ip_literal

    hosts = sorted(h for h in scheduled_hosts(engine) if ip_literal(h) is None)
    for i in range(0, len(hosts), at_once):
        batch = [h for h in hosts[i:i + at_once] if resolver.cached(h) is None]
        if batch:
            await asyncio.wait_for(_look_up_all(resolver, batch), 60)


async def _look_up_all(resolver: Any, hosts: list[str]) -> None:
    """Look ``hosts`` up at once; returns when every lookup has answered."""
    done = asyncio.get_running_loop().create_future()
    left = len(hosts)

    def one(_answer: Any, _ms: float) -> None:
        nonlocal left
        left -= 1
        if left == 0 and not done.done():
            done.set_result(None)

    for h in hosts:
        resolver.lookup(h, one)
    await done


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


async def _write_capacity(store: Any, check_ids: list[int], seconds: float) -> dict[str, Any]:
    """Rows per second the engine's results path commits when fed as fast as possible."""
    from engine.kinds.uptime import CODE as KIND_UPTIME
    from engine.runtime.metrics import Metrics
    from engine.scheduler.results import ResultsWriter

    writer = ResultsWriter(store, metrics=Metrics(), limit=200_000, flush_interval=0.5)
    stop = asyncio.Event()
    task = asyncio.create_task(writer.run(stop))
    n_ids = len(check_ids)
    at = datetime.now(UTC)
    loop = asyncio.get_running_loop()
    # Warm-up (first COPY, plans), then the measured span.
    for i in range(2000):
        await writer.put((check_ids[i % n_ids], at, KIND_UPTIME, 0, 200, 1.5, None, 0.2, None,
                          0.8, "local", False, None))
    await asyncio.sleep(min(1.0, seconds / 3))
    c0, w0, t0 = cpu_seconds(), writer.written, loop.time()
    i = 0
    while loop.time() - t0 < seconds:
        for _ in range(500):
            i += 1
            await writer.put((check_ids[i % n_ids], datetime.now(UTC), KIND_UPTIME, 0, 200,
                              1.5, None, 0.2, None, 0.8, "local", False, None))
        await asyncio.sleep(0)  # put() only waits when the buffer is full: let the writer run
    elapsed = loop.time() - t0
    written = writer.written - w0
    cpu = cpu_seconds() - c0
    stop.set()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(task, 30)
    return {
        "rows": written,
        "seconds": round(elapsed, 3),
        "rows_per_s": round(written / elapsed, 1) if elapsed > 0 else None,
        "cpu_s_per_row": round(cpu / written, 9) if written else None,
    }


async def _engine(cfg: dict[str, Any]) -> None:
    from engine.db.store import Store
    from engine.runtime.metrics import Metrics
    from engine.runtime.secretbox import SecretBox
    from engine.runtime.settings import Settings

    settings = Settings(**cfg["settings"])
    store = await Store.connect(cfg["dsn"], min_size=2, max_size=10,
                                secrets=SecretBox.from_settings(settings))
    try:
        metrics = Metrics()
        recorder = LatenessRecorder(metrics.lateness)
        metrics.lateness = cast(Any, recorder)  # see LatenessRecorder: a reading, not a change
        engine = build_engine(store, settings, metrics)
        outbox: list[asyncio.Task[None]] = []
        outbox_stop = asyncio.Event()
        if cfg.get("outbox"):
            # The webhook deliverer and the notification runner in the engine's process, as
            # ``upwatch run`` has them (the notify scenario).
            from engine.delivery.notify.sender import grouping, notification_runner
            from engine.delivery.webhooks.deliverer import Deliverer

            store.notification_grouping = grouping(settings)
            outbox = [
                asyncio.create_task(Deliverer(store, settings, metrics=metrics).run(outbox_stop)),
                asyncio.create_task(
                    notification_runner(store, settings, metrics=metrics).run(outbox_stop)),
            ]
        gc_timer = GcTimer()
        gc.callbacks.append(gc_timer)
        gc.collect()
        rss_base = rss_bytes()
        at_loaded = _RssWhenSet()
        watch_loaded(engine, at_loaded)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        t_load = loop.time()
        run = asyncio.create_task(engine.run(stop), name="bench-engine")
        try:
            await asyncio.wait_for(engine.loaded.wait(), cfg.get("load_timeout_s", 120))
            load_s = loop.time() - t_load
            rss_loaded = rss_bytes()
            scheduled = len(engine)
            emit("loaded", scheduled=scheduled, load_s=round(load_s, 3))
            warmup = await _warmup_timeline(engine, metrics, cfg["warmup_s"])
            resolver = resolver_of(engine)
            if cfg.get("dns_prewarm") and resolver is not None:
                await _prewarm(resolver, engine)
            if cfg.get("dns_warm_s") and resolver is not None:
                # bench --names at capacity: the window describes names already cached (the
                # steady state: TTLs are longer than any window), not the cold start. Cached
                # means answered: at capacity the cold start asks for every name within a
                # fraction of a second, more than the bench's DNS server (Python, on the
                # shared core) answers within c-ares's time-out; a name that timed out is
                # looked up again after dns_failure_ttl, and at capacity a dozen probes of
                # it (one every interval) would wait on that lookup inside the window.
                end = loop.time() + cfg["dns_warm_s"]
                while (len(resolver) < scheduled  # noqa: ASYNC110
                       or resolver.unsettled()) and loop.time() < end:
                    await asyncio.sleep(0.1)  # polls counts the engine keeps, no event
                await asyncio.sleep(1.0)

            cg_probes0: dict[str, float] | None = None
            if cfg.get("callgrind"):
                await callgrind.instrument(True)
                cg_probes0 = _counter_values(metrics.probes)
            probes0 = _counter_values(metrics.probes)
            dns = resolver_of(engine)
            dns0 = (dns.hits, dns.lookups) if dns is not None else (0, 0)
            written0 = engine.results.written
            http = http_prober_of(engine)
            tls0 = (getattr(http, "tls_handshakes", 0), getattr(http, "tls_resumed", 0))
            rss_window = rss_bytes()  # names cached by now when the warm-up covered them
            wall0, t0, cpu0 = time.time(), loop.time(), cpu_seconds()
            split0 = cpu_split()
            profiler = _cprofile_start(cfg)
            recorder.recording = gc_timer.on = True
            # Probes in flight, read four times a second beside the slices (names against
            # literals like with like).
            seen_task = asyncio.create_task(_in_flight_during(engine, cfg["duration_s"]))
            # The window in equal slices, each read at its end (cumulative seconds, CPU
            # seconds, probes): how steady the engine's CPU per probe was inside the window.
            marks: list[list[float]] = []
            slices = max(1, int(cfg.get("slices") or 1))
            for i in range(slices):
                await asyncio.sleep(max(0.0, t0 + cfg["duration_s"] * (i + 1) / slices
                                        - loop.time()))
                marks.append([round(loop.time() - t0, 3), round(cpu_seconds() - cpu0, 6),
                              sum(_delta(_counter_values(metrics.probes), probes0).values())])
            in_flight_seen = await seen_task
            recorder.recording = gc_timer.on = False
            _cprofile_stop(profiler, cfg)
            cpu1, t1, wall1 = cpu_seconds(), loop.time(), time.time()
            split1 = cpu_split()
            written = engine.results.written - written0
            probes = _delta(_counter_values(metrics.probes), probes0)
            probes_all = sum(_counter_values(metrics.probes).values())
            dns_window = ({"hits": dns.hits - dns0[0], "lookups": dns.lookups - dns0[1],
                           "cached_names": len(dns), "failures": dict(dns.failures)}
                          if dns is not None else None)
            rss_end = rss_bytes()
            tls_window = {"handshakes": getattr(http, "tls_handshakes", 0) - tls0[0],
                          "resumed": getattr(http, "tls_resumed", 0) - tls0[1],
                          "sessions_kept": len(getattr(http, "_sessions", ()))}
            in_flight = engine.in_flight
            callgrind_probes = callgrind_answered = None
            if cg_probes0 is not None:
                await callgrind.instrument(False)
                # Both counts are taken as a switch returns: each switch's own lag is then
                # on both sides of the span.
                cg_delta = _delta(_counter_values(metrics.probes), cg_probes0)
                callgrind_probes = sum(cg_delta.values())
                callgrind_answered = answered(cg_delta)
        finally:
            stop.set()
            outbox_stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(run, 20)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*outbox), 20)
            await close_engine(engine)
        capacity = None
        if cfg.get("write_capacity_s"):
            ids = [r[0] for r in await store.pool.fetch(
                "SELECT id FROM checks WHERE is_enabled ORDER BY id LIMIT 50000")]
            if ids:
                capacity = await _write_capacity(store, ids, cfg["write_capacity_s"])
        emit(
            "result",
            scheduled=scheduled,
            load_s=round(load_s, 3),
            rss_base=rss_base,
            rss_loaded=rss_loaded,
            rss_loaded_before_probes=at_loaded.rss,
            rss_end=rss_end,
            rss_window_start=rss_window,
            tls=tls_window,
            wall_start=wall0,
            wall_end=wall1,
            seconds=t1 - t0,
            cpu_s=cpu1 - cpu0,
            user_s=split1[0] - split0[0],
            sys_s=split1[1] - split0[1],
            probes=probes,
            results_written=written,
            in_flight_at_end=in_flight,
            lateness_ms=summary_ms(recorder.samples),
            gc=gc_timer.to_dict(t1 - t0),
            write_capacity=capacity,
            callgrind_probes=callgrind_probes,
            callgrind_answered=callgrind_answered,
            in_flight_mean=in_flight_seen[0],
            in_flight_max=in_flight_seen[1],
            probes_all=probes_all,
            dns=dns_window,
            warmup=warmup,
            slices=marks,
        )
    finally:
        await store.close()


def udp_drops(pid: int | str = "self") -> dict[str, int]:
    """Datagrams the kernel dropped at each of a process's UDP sockets, by inode (their
    receive buffer was full: the ``drops`` column of /proc/net/udp and udp6). Sockets come
    and go (c-ares opens new ones): compare two readings with :func:`dropped_since`."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    drops: dict[str, int] = {}
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as fh:
            next(fh, None)
            for line in fh:
                fields = line.split()
                if len(fields) > 12 and fields[9] in inodes:
                    drops[fields[9]] = int(fields[-1])
    return drops


def dropped_since(before: dict[str, int], now: dict[str, int]) -> int:
    """Datagrams dropped between two :func:`udp_drops` readings (a socket new since the
    first counts from 0; one closed since is not seen: its last drops are lost)."""
    return sum(n - before.get(inode, 0) for inode, n in now.items() if n > before.get(inode, 0))


async def _warmup_timeline(engine: Any, metrics: Any, seconds: float) -> list[list[float]]:
    """Wait ``seconds`` (the warm-up) and say how the cold start went, one row a second:
    [seconds since loaded, probes done, in flight, name lookups started, lookups failed by
    time-out, other lookup failures, the event loop's longest stall (ms: a 20 ms ticker's
    overshoot), datagrams dropped at this process's full UDP sockets (c-ares's), this
    process's CPU (share of a core)]. Counts are per second. A reading: it changes nothing
    in the engine."""
    loop = asyncio.get_running_loop()
    dns = resolver_of(engine)

    def counts() -> tuple[float, int, int, int]:
        failures = dict(dns.failures) if dns is not None else {}
        timeouts = failures.pop("timeout", 0)
        return (sum(_counter_values(metrics.probes).values()),
                dns.lookups if dns is not None else 0, timeouts, sum(failures.values()))

    rows: list[list[float]] = []
    start = last = loop.time()
    prev, udp_prev, cpu_prev = counts(), udp_drops(), cpu_seconds()
    stall = 0.0
    end = start + seconds
    # The end is judged once per pass, after the sleep, by the reading that writes the last
    # row: a second clock read at the top of the loop could pass the end after a pass that
    # did not, and the last row was lost (a loaded CI machine did).
    done = False
    while not done:
        t = loop.time()
        await asyncio.sleep(max(0.0, min(0.02, end - t)))
        now = loop.time()
        stall = max(stall, now - t - 0.02)
        done = now >= end
        if now - last >= 1.0 or done:
            cur, udp, cpu = counts(), udp_drops(), cpu_seconds()
            span = now - last
            rows.append([round(now - start, 1), round((cur[0] - prev[0]) / span),
                         engine.in_flight, round((cur[1] - prev[1]) / span),
                         cur[2] - prev[2], cur[3] - prev[3], round(max(stall, 0.0) * 1000, 1),
                         dropped_since(udp_prev, udp), round((cpu - cpu_prev) / span, 3)])
            prev, udp_prev, cpu_prev, last, stall = cur, udp, cpu, now, 0.0
    return rows


class _RssWhenSet(asyncio.Event):
    """``Engine.loaded`` that reads the RSS as it is set: every check adopted, no probe
    started yet (the engine goes on into its first sweep before the bench's waiter wakes,
    and on a busy machine hundreds of probes had started by the later reading)."""

    rss: int | None = None

    def set(self) -> None:
        if self.rss is None:
            self.rss = rss_bytes()
        super().set()


async def settled_rss(max_s: float, *, min_s: float = 1.0) -> int:
    """RSS once it stops moving (three readings 0.2 s apart within 0.5%), at most ``max_s``."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    readings: list[int] = []
    while True:
        await asyncio.sleep(0.2)
        readings.append(rss_bytes())
        last = readings[-3:]
        if (loop.time() - start >= min_s and len(last) == 3
                and max(last) - min(last) <= 0.005 * max(last)):
            return max(last)
        if loop.time() - start >= max_s:
            return max(readings)


async def _inflight(cfg: dict[str, Any]) -> None:
    prober = build_http_prober(timeout=cfg.get("timeout_s", 120.0))
    # Complete probes first, so one-time costs (TLS context, code paths, caches) belong to
    # the baseline, not to the in-flight probes.
    warm = [await prober.probe(u) for u in cfg["warm_urls"]]
    warm_errors = [o.error for o in warm if o.error]
    gc.collect()
    rss_before = await settled_rss(3.0, min_s=0.5)
    tasks = [asyncio.create_task(prober.probe(u)) for u in cfg["hang_urls"]]
    rss_during = await settled_rss(cfg.get("settle_max_s", 15.0), min_s=1.5)
    ended_early = sum(1 for t in tasks if t.done())
    early_errors = sorted({t.result().error or "" for t in tasks if t.done()})[:3]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    k = len(tasks)
    emit(
        "result",
        probes=k,
        rss_before=rss_before,
        rss_during=rss_during,
        bytes_per_probe=round((rss_during - rss_before) / k, 1) if k else None,
        ended_early=ended_early,
        early_errors=early_errors,
        warm_errors=warm_errors[:3],
    )


async def _deliverer(cfg: dict[str, Any]) -> None:
    from engine.db.store import Store
    from engine.delivery.webhooks.deliverer import Deliverer
    from engine.runtime.metrics import Metrics
    from engine.runtime.secretbox import SecretBox
    from engine.runtime.settings import Settings

    settings = Settings(**cfg["settings"])
    store = await Store.connect(cfg["dsn"], min_size=2, max_size=20,
                                secrets=SecretBox.from_settings(settings))
    metrics = Metrics()
    stop = asyncio.Event()
    task = asyncio.create_task(Deliverer(store, settings, metrics=metrics).run(stop))
    profiler: Any = None
    try:
        emit("ready")
        async for msg in commands():
            if msg.get("cmd") == "mark":
                # cProfile (--cprofile) covers the window between these marks.
                if msg.get("tag") == "start":
                    profiler = _cprofile_start(cfg)
                elif msg.get("tag") == "end":
                    _cprofile_stop(profiler, cfg)
                    profiler = None
                counts = _counter_values(metrics.deliveries)
                emit("mark", tag=msg.get("tag"), wall=time.time(), cpu_s=cpu_seconds(),
                     delivered=counts.get("delivered", 0.0), tries=sum(counts.values()))
            elif msg.get("cmd") == "stop":
                break
            if task.done():
                break
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 15)
        await store.close()
    if task.done() and not task.cancelled() and task.exception() is not None:
        emit("error", message=f"deliverer died: {task.exception()!r}")


def run(cfg: dict[str, Any]) -> int:
    role = cfg["role"]
    main = {"engine": _engine, "inflight": _inflight, "deliverer": _deliverer}[role]
    return run_reporting(main(cfg))
