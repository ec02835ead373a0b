"""``upwatch bench overload``: a whole node (``upwatch run``'s default: the engine and the API
on one loop, one core) asked for twice what it can probe, and for half, in the ``internet``
world (upwatch_bench/scenarios/internet.py says what the world is).

What runs, in order (N monitors, default 10,000; ``--quick``: 1,500 for 10 s windows):

1. Unloaded: every check disabled; ``POST /webapi/monitors`` at concurrency 8 and ``GET
   /webapi/monitors/{id}`` one at a time, each for 10 s (the reference rates).
2. Capacity: every check at an interval of 2.5 s (the node asked for N / 2.5 probes/s, a few
   times what one core does); the median of the probes it does a second
   (``upwatch_probes_done_per_second``) over 16 s is the capacity C (its own gauge,
   ``upwatch_probe_capacity_per_second``, is recorded beside it).
3. Twice the capacity, then half: every check at a 5 s interval (by the time scale), and as
   many of them enabled as ask 2 C and then C / 2 probes per second; after a warm-up, a
   window of ``--duration`` seconds (default 60) with the GETs running throughout and the
   POSTs in its last 10 s (each create adds probes of its new monitor, demand past the
   factor that waits a round in the queue: the rates and the fairness are read over the
   window before them). The saturated node's rate is read over the last two intervals of
   the 2x warm-up and through the window: when the warm-up's median puts the demand more
   than 10 % off twice it, the window is sized again from it and the node restarted (at
   most three times); the 2x window is judged against its own median rate, and the half
   window sized from it (``demand_over_capacity``). Readings: GET p50/p99, POST rate
   against the unloaded one, the node's load gauges, and from the result rows before the
   POSTs, for the healthy sites' checks: the gaps between a check's consecutive probes in
   intervals (p50, p99, max), the fraction of checks whose every gap (and the window's
   edges) is at most demand / capacity intervals plus one dispatch tick (the promise; at
   exactly 2x the mean gap is 2 by construction, so a bound of exactly 2 would be met by
   chance), the same at 2 intervals, and the spread of lateness (each check's mean gap,
   least and most). Failing sites (hanging, slow) take their probe timeout, longer than an
   interval; they count apart.

The first round: a node's first probe of each site makes a full TLS handshake (no session
to resume yet) and does about half what later ones do, and the more is asked the longer
that round lasts (at 2x, two intervals at half speed). Read inside it, a rate says less
than the node can do and the windows were sized too small (448/s in a warm-up, then 622/s
in the window). So every rate is read only once each healthy check has been probed since
the node started (``first_round_s``), and a few seconds later.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from upwatch_bench import layout
from upwatch_bench.database import seed_monitors
from upwatch_bench.gaps import probe_gaps
from upwatch_bench.harness import Bench, BenchError
from upwatch_bench.world import INTERVAL_S, World
from upwatch_bench.world_setup import seed_world, served_world

SIDE_S = 10.0  # the unloaded references and the POSTs of each window
# The capacity phase's interval: N / 2.5 probes/s asked, a few times what a core does.
CAPACITY_INTERVAL_S = 2.5
CAPACITY_READ_S = 16.0
AFTER_FIRST_ROUND_S = 4.0  # past the first round, before any rate is read
FIRST_ROUND_LIMIT_S = 300.0
WARM_INTERVALS = 2  # after the first round, before and while the warm-up reads the rate
WINDOW_INTERVAL_S = 5.0  # the windows' interval (a healthy site thinks up to 300 ms)
FACTORS = (2.0, 0.5)
RESIZE_TOLERANCE = 0.1  # a warm-up reading this far off the factor sizes the window again
RESIZE_ATTEMPTS = 3


async def scenario_overload(b: Bench) -> dict[str, Any]:
    async with served_world(b) as up:
        return await _measure(b, up.world)


async def _measure(b: Bench, world: World) -> dict[str, Any]:
    m = b.opts.monitors
    b.progress.phase(f"seeding {m:,} monitors", max(2.0, m / 2000))
    await seed_world(b, world)
    account, token = await b.store.create_account("bench-overload")
    async with b.store.pool.acquire() as conn:
        await seed_monitors(conn, account.id, [world.urls()[0]], uptime=True,
                            certificate=False, interval=INTERVAL_S)
        watched = await conn.fetchval(
            "SELECT id FROM monitors WHERE account_id = $1", account.id)
        enabled = [r["id"] for r in await conn.fetch(
            "SELECT id FROM checks WHERE is_enabled")]
    healthy_hosts = [s.host for s in world.sites() if s.kind in ("https", "http", "redirect")]
    post_site = next(s.url for s in world.sites() if s.kind == "http")
    async with b.store.pool.acquire() as conn:
        healthy = [r["id"] for r in await conn.fetch(
            """SELECT c.id FROM checks c JOIN monitors m ON m.id = c.monitor_id
               WHERE c.is_enabled AND c.kind = 'uptime' AND m.host = ANY($1::text[])""",
            healthy_hosts)]
    window = b.opts.duration
    rec: dict[str, Any] = {"scenario": "overload", "monitors": m, "window_s": window}

    # 1. Unloaded.
    await _set_enabled(b, enabled, False)
    async with _node(b, time_scale=1.0) as (base, _):
        get, post = await asyncio.gather(
            _gets(b, base, token, watched, SIDE_S), _posts(b, base, token, SIDE_S, post_site))
    rec["unloaded"] = {"get": get, "post": post}
    await _set_enabled(b, enabled, True)

    # 2. Capacity: what the saturated node does a second (its gauge, for the record).
    scale = CAPACITY_INTERVAL_S / INTERVAL_S
    async with _node(b, time_scale=scale) as (base, started):
        first = await _first_round(b, healthy, started, "capacity")
        b.progress.phase("capacity: the node asked for far more than it can do",
                         AFTER_FIRST_ROUND_S + CAPACITY_READ_S)
        await asyncio.sleep(AFTER_FIRST_ROUND_S)
        done, gauge = await _sample_load(base, CAPACITY_READ_S)
    if done is None:
        raise BenchError("the node reported no load")
    capacity = done
    rec["capacity"] = {"probes_per_s": round(capacity, 1), "first_round_s": first,
                       "gauge_per_s": round(gauge, 1) if gauge is not None else None}

    # 3. Twice and half the capacity: a fixed interval, as many checks enabled as that asks.
    scale = WINDOW_INTERVAL_S / INTERVAL_S
    for factor in FACTORS:
        label = f"{factor:g}x capacity"
        saturated = factor > 1  # only then is what the node does what it can do
        for attempt in range(RESIZE_ATTEMPTS + 1):
            n = max(1, min(len(enabled), round(factor * capacity * WINDOW_INTERVAL_S)))
            await _set_enabled(b, enabled[n:], False)
            await _set_enabled(b, enabled[:n], True)
            on = set(enabled[:n])
            asked = n / WINDOW_INTERVAL_S
            async with _node(b, time_scale=scale) as (base, started):
                first = await _first_round(b, [c for c in healthy if c in on], started, label)
                b.progress.phase(f"{label}: warming up",
                                 AFTER_FIRST_ROUND_S + WARM_INTERVALS * WINDOW_INTERVAL_S)
                await asyncio.sleep(AFTER_FIRST_ROUND_S)
                warm, _ = await _sample_load(base, WARM_INTERVALS * WINDOW_INTERVAL_S)
                off = (saturated and warm is not None
                       and abs(asked / warm / factor - 1) > RESIZE_TOLERANCE)
                if off and attempt < RESIZE_ATTEMPTS and n < len(enabled):
                    assert warm is not None
                    b.notes.append(f"{label}: the warm-up did {warm:,.0f} probes/s against "
                                   f"{capacity:,.0f}; sized again")
                    capacity = warm
                    continue
                # The POSTs come last: each create adds probes of a new monitor (demand past
                # the factor, an uptime and a domain check, waiting a round in the queue), so
                # the rates and the fairness are read over the window before them.
                side = min(SIDE_S, window)
                before = window - side if window > 2 * side else window
                w0 = time.time()
                get_task = asyncio.create_task(_gets(b, base, token, watched, window))
                seconds: list[dict[str, Any]] = []
                done, gauge = await _sample_load(base, before, seconds)
                shares = [x["share"] for x in seconds if x["share"] is not None]
                f1 = time.time()
                post = await _posts(b, base, token, side, post_site)
                get = await get_task
                w1 = time.time()
                load = await _load(base)
            break
        if saturated and done:
            capacity = done  # the half-capacity window is sized from the 2x window's rate
        f1 = f1 if before < window else w1
        fair = await probe_gaps(b.store.pool, [c for c in healthy if c in on], w0, f1,
                                WINDOW_INTERVAL_S, asked / capacity)
        fair["fairness_window_s"] = round(f1 - w0, 1)
        rec[f"x{factor:g}"] = {
            "enabled_checks": n, "asked_per_s": round(asked, 1), "interval_s": WINDOW_INTERVAL_S,
            "first_round_s": first, "capacity_per_s": round(capacity, 1), "done_per_s": done,
            "gauge_per_s": gauge, "get": get, "post": post,
            "engine_share": {"least": min(shares, default=None),
                             "median": statistics.median(shares) if shares else None,
                             "most": max(shares, default=None)},
            "seconds": seconds,
            "post_vs_unloaded": _ratio(post.get("rps"), rec["unloaded"]["post"].get("rps")),
            "load": load.get("load"), **fair,
        }
        if n == len(enabled) and factor > 1:
            b.notes.append(f"{label}: every seeded monitor enabled ({n:,}); more --monitors "
                           "would ask more")
    await _set_enabled(b, enabled, True)
    return rec


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


async def _set_enabled(b: Bench, ids: list[int], on: bool) -> None:
    async with b.store.pool.acquire() as conn:
        await conn.execute("UPDATE checks SET is_enabled = $2 WHERE id = ANY($1::bigint[])",
                           ids, on)


@contextlib.asynccontextmanager
async def _node(b: Bench, *, time_scale: float) -> AsyncIterator[tuple[str, float]]:
    """A node of this world's database: its API's base URL and when it was ready."""
    port = layout.free_port(layout.API_HOST)
    base = f"http://{layout.API_HOST}:{port}"
    settings = b.settings(time_scale=time_scale, host=layout.API_HOST, port=port,
                          base_url=base, rate_limit_per_second=0,
                          plans={"default": {"monitor_limit": 1_000_000}})
    child = await b.procs.spawn("node", "node", {"dsn": b.db.dsn, "settings": settings},
                                b.engine_cpus)
    try:
        await b.wait(child, "ready", "the node: loading its checks", 5, slack=300)
        yield base, time.time()
    finally:
        await b.procs.stop(child)


async def _first_round(b: Bench, ids: list[int], since: float, label: str) -> float:
    """Wait until each of ``ids`` has a result since ``since`` (the node's first round of
    probes, module docstring); the seconds it took from ``since``."""
    b.progress.phase(f"{label}: the node's first round of probes", 20)
    at = datetime.fromtimestamp(since, UTC)
    deadline = time.monotonic() + FIRST_ROUND_LIMIT_S
    while True:
        async with b.store.pool.acquire() as conn:
            missing = await conn.fetchval(
                """SELECT count(*) FROM unnest($1::bigint[]) AS c(id)
                   WHERE NOT EXISTS (SELECT 1 FROM probe_results r
                                     WHERE r.check_id = c.id AND r.at >= $2)""", ids, at)
        if not missing:
            return round(time.time() - since, 1)
        if time.monotonic() > deadline:
            raise BenchError(f"{label}: {missing:,} checks not probed "
                             f"{FIRST_ROUND_LIMIT_S:g} s after the node started")
        await asyncio.sleep(1.0)


async def _sample_load(base: str, seconds: float,
                       each: list[dict[str, Any]] | None = None,
                       ) -> tuple[float | None, float | None]:
    """The medians of the node's probes done a second and of its capacity gauge, read once a
    second for ``seconds`` (None: nothing read); each second's figures are appended
    to ``each`` when given, with what the node did, its share and a probe's cost."""
    done: list[float] = []
    gauge: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        with contextlib.suppress(Exception):
            load = (await _load(base)).get("load") or {}
            if load.get("done_per_s") is not None:
                done.append(float(load["done_per_s"]))
            if load.get("capacity_per_s"):
                gauge.append(float(load["capacity_per_s"]))
            if each is not None:
                each.append({"t": round(time.time(), 1), "done": load.get("done_per_s"),
                                "share": load.get("engine_share"),
                                "uptime_cost_us": (load.get("cost_us_by_kind") or {}).get(
                                    "uptime")})
    return (round(statistics.median(done), 1) if done else None,
            round(statistics.median(gauge), 1) if gauge else None)


async def _load(base: str) -> dict[str, Any]:
    import aiohttp

    async with aiohttp.ClientSession() as http, http.get(base + "/healthz") as r:
        body: dict[str, Any] = await r.json()
        return body


async def _gets(b: Bench, base: str, token: str, monitor: int, seconds: float) -> dict[str, Any]:
    return await _loadgen(b, "gets", seconds, {
        "urls": [f"{base}/webapi/monitors/{monitor}"],
        "headers": {"Authorization": f"Bearer {token}"},
        "concurrency": 1})


async def _posts(b: Bench, base: str, token: str, seconds: float,
                 site: str) -> dict[str, Any]:
    """Creates at concurrency 8, each of a new monitor of the healthy ``site`` (a URL of the
    world; a query makes each new): a created monitor is probed at once, and one that
    failed would be re-probed ahead of the queue, which would measure the creates' targets
    rather than the node."""
    return await _loadgen(b, "posts", seconds, {
        "urls": [base + "/webapi/monitors"],
        "headers": {"Authorization": f"Bearer {token}"},
        "create_url_prefix": f"{site}?c{int(time.time() * 1000)}-",
        "create_fields": {"interval": 3600},
        "concurrency": 8})


async def _loadgen(b: Bench, name: str, seconds: float, cfg: dict[str, Any]) -> dict[str, Any]:
    """The ``loadgen`` child ``name`` (``cfg``) for ``seconds`` on the other cores: its
    requests per second, latency p50/p99 and errors."""
    gen = await b.procs.spawn(name, "loadgen", {**cfg, "duration_s": seconds}, b.other_cpus)
    try:
        res = await gen.expect("result", seconds + 60)
    finally:
        await b.procs.stop(gen)
    lat = res["latency_ms"]
    return {"rps": round(res["rps"] or 0.0, 1), "p50_ms": lat["p50"], "p99_ms": lat["p99"],
            "errors": res["errors"]}


def table(rec: dict[str, Any]) -> str:
    """The record as a few readable lines."""
    lines = [f"overload: {rec['monitors']:,} monitors of the internet world, one node "
             f"(engine and API on one core); windows of {rec['window_s']:g} s"]
    un = rec["unloaded"]
    lines.append(f"  unloaded     GET p50 {un['get']['p50_ms']} ms p99 {un['get']['p99_ms']} ms;"
                 f" POST {un['post']['rps']}/s")
    lines.append(f"  capacity     {rec['capacity']['probes_per_s']:,.0f} probes/s done by the "
                 f"saturated node (its gauge: {rec['capacity']['gauge_per_s']}/s)")
    for factor in FACTORS:
        r = rec.get(f"x{factor:g}")
        if r is None:
            continue
        load = r.get("load") or {}
        gaps = r["mean_gap_intervals"]
        dist = r["gap_intervals"]
        lines.append(
            f"  {factor:g}x ({r['enabled_checks']:,} checks, {r['asked_per_s']:,.0f}/s asked, "
            "interval "
            f"{r['interval_s']:g} s; capacity {r['capacity_per_s']:,.0f}/s, demand / "
            f"capacity {r['demand_over_capacity']}): "
            f"GET p50 {r['get']['p50_ms']} ms p99 {r['get']['p99_ms']} ms; POST "
            f"{r['post']['rps']}/s ({r['post_vs_unloaded']}x unloaded); done "
            f"{load.get('done_per_s')}/s, overloaded {load.get('overloaded')}; gaps p50 "
            f"{dist['p50']} p99 {dist['p99']} max {dist['max']} intervals; within "
            f"{r['bound_intervals']:g} intervals + tick {r['probed_within_ratio_intervals']}, "
            f"within 2x {r['probed_within_2x_interval']}, never {r['never_probed']}; mean "
            f"gap {gaps['least_late']}-{gaps['most_late']} intervals "
            f"(spread {r['lateness_spread_intervals']}); their probes a second "
            f"{r['probes_per_s']['least']}-{r['probes_per_s']['most']} "
            f"(median {r['probes_per_s']['median']})")
    return "\n".join(lines)
