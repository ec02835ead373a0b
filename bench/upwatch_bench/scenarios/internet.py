"""``upwatch bench internet``: the engine in a world like the one operators probe.

The world (upwatch_bench/world.py): every monitor a distinct host name answered by the
bench's DNS server (``--dns-latency``, default 20 ms; ``--dns-ttl``, default 300 s); 80 %
HTTPS through nginx (TLS 1.3 and 1.2, ECDSA P-256 and RSA-2048 certificates, session tickets
on), 20 % plain HTTP of which half redirect to HTTPS; think times of 10-300 ms and bodies of
1-200 KB; 5 % failing kinds (slow, hanging, refusing, NXDOMAIN, bad certificate). nginx,
its backend and the DNS server run on the cores the engine does not use (upwatch_bench/nginx.py
says why nginx).

What runs, in order (N monitors, default 50,000, at 60 s; ``--quick``: 2,000 at a tenth of
the time):

1. The engine (the real Engine, its child pinned to one core) over all monitors. The window
   starts after two whole intervals (``--warmup-intervals``): every name was looked up once
   and the cache is in its steady state, and a late cold start has caught up (the record's
   ``warmup_timeline`` shows the cold start a second at a time). Readings: probes asked
   and done, CPU per probe, lateness, in flight, DNS questions the server received and the
   resolver's cache hits, TLS handshakes and how many
   resumed a session, RSS before loading, after loading (idle) and at the window's start
   (every name cached), and every result row of the window, classified by the site's kind.
2. The engine over the healthy HTTPS monitors only (a quarter of them at a quarter of the
   interval: the same HTTPS probes per second as in 1), after one whole interval: its CPU
   per probe is ``https_cpu_s_per_probe`` (scheduling, DNS cache, TLS, body, results: all
   an HTTPS probe costs the engine), read in slices too. Bracketing it, right before and
   right after, rounds of ``openssl s_time`` (upwatch_bench/bracket.py says why): each round
   ``-new`` and ``-reuse``, handshakes only and with ``-www`` of a page of the world's mean
   body size (what a probe does: a handshake, a GET, the whole body read), against each TLS
   server kind of the same nginx, pinned to the engine's core. The HTTPS probe is held to
   its targets (1.0x ``-new``, 1.2x ``-reuse``, and the two weighted by its share
   of resumed handshakes against the ``-www`` figures) by the median over the rounds.
3. The naive baseline (upwatch_bench/roles/baseline.py) on the same URLs and names: one task per
   monitor, aiohttp with its default DNS cache, through aiodns to the same server.
4. Memory per in-flight HTTPS probe (the engine's prober holding K probes whose answer
   never comes, through nginx).
5. The plain-HTTP limit: ``wrk -H 'Connection: close'`` against the plain-HTTP site, pinned
   to the engine's core.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from upwatch_bench import bracket
from upwatch_bench.certs import WorldCerts
from upwatch_bench.harness import (
    Bench,
    Window,
    baseline_figures,
    dns_figures,
    run_engine,
)
from upwatch_bench.limits import run_wrk
from upwatch_bench.nginx import Nginx
from upwatch_bench.sampler import Sampler
from upwatch_bench.scenarios.internet_stime import (
    S_TIME_ROUNDS,
    s_time_by_kind,
    s_time_figures,
    s_time_instructions,
    s_time_rounds,
)
from upwatch_bench.scenarios.internet_table import targets
from upwatch_bench.stats import per, ratio, summary_ms, time_wait_sockets
from upwatch_bench.world import (
    ADDRESS,
    EXPECTED_WORDS,
    FAILING_KINDS,
    INTERVAL_S,
    KINDS,
    SERVER_KINDS,
    World,
    index_of,
)
from upwatch_bench.world_setup import seed_world, served_world

HTTPS_SHARE_SCALE = 4  # step 2: a quarter of the HTTPS monitors at a quarter of the interval
_SAMPLES = 3  # distinct reason words kept per kind
HTTPS_SLICES = 4  # the HTTPS-only window read in quarters too
# Before the first s_time rounds: the database below this many cores over 2 s (the HTTPS
# window's writes take ~0.04), waiting at most so long.
DB_SETTLED_CORES = 0.1
DB_SETTLE_LIMIT_S = 20.0


async def scenario_internet(b: Bench) -> dict[str, Any]:
    async with served_world(b) as up:
        dns, server = b.dns, up.server
        sampler = Sampler(lambda: {"nginx": server.pids(), "backend": [up.backend.pid],
                                   "dns": [dns.pid] if dns is not None else []},
                          b.db.cpu_seconds)
        sampling = asyncio.create_task(sampler.run())
        try:
            return await _measure(b, up.world, up.certs, server, sampler)
        finally:
            sampling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampling


async def _only_https(b: Bench, world: World) -> int:
    """Leave enabled only the uptime checks of a 1/HTTPS_SHARE_SCALE share of the healthy
    HTTPS monitors; their count."""
    hosts = [s.host for s in world.sites()
             if s.kind == "https" and s.index % HTTPS_SHARE_SCALE == 0]
    async with b.store.pool.acquire() as conn:
        await conn.execute(
            """UPDATE checks c SET is_enabled = (c.kind = 'uptime' AND m.host = ANY($1::text[]))
               FROM monitors m WHERE m.id = c.monitor_id""", hosts)
    return len(hosts)


async def _rows(b: Bench, wall0: float, wall1: float) -> list[Any]:
    return list(await b.store.pool.fetch(
        """SELECT m.host, r.kind, r.outcome, r.error, r.confirmation, r.total_ms
           FROM probe_results r JOIN checks c ON c.id = r.check_id
           JOIN monitors m ON m.id = c.monitor_id
           WHERE r.at >= $1 AND r.at < $2""",
        datetime.fromtimestamp(wall0, UTC), datetime.fromtimestamp(wall1, UTC)))


def classify(world: World, rows: list[Any]) -> dict[str, Any]:
    """Result rows by the site's kind: probes, failures (outcome 2), degraded (1) and a few
    distinct reasons; healthy sites that failed, failing sites that did not; the
    certificate checks (bad-certificate sites) apart."""
    by_kind: dict[str, dict[str, Any]] = {
        k: {"probes": 0, "failed": 0, "degraded": 0, "reasons": [], "confirmations": 0}
        for k in KINDS}
    took: dict[str, list[float]] = {k: [] for k in KINDS}
    cert: dict[str, Any] = {"probes": 0, "failed": 0, "reasons": []}
    healthy_failed = healthy_degraded = failing_passed = wrong_words = 0
    healthy_reasons: list[str] = []
    for r in rows:
        i = index_of(r["host"])
        if i is None or i >= world.monitors:
            continue
        site = world.site(i)
        error = r["error"] or ""
        if r["kind"] == 2:  # certificate check
            cert["probes"] += 1
            if r["outcome"] != 0:
                cert["failed"] += 1
                _sample(cert["reasons"], error)
                if not EXPECTED_WORDS["badcert"].search(error):
                    wrong_words += 1
            else:
                failing_passed += 1
            continue
        g = by_kind[site.kind]
        g["probes"] += 1
        if r.get("confirmation"):
            g["confirmations"] += 1
        if r.get("total_ms") is not None:
            took[site.kind].append(r["total_ms"] / 1000.0)
        if r["outcome"] == 2:
            g["failed"] += 1
            _sample(g["reasons"], error)
            if site.healthy:
                healthy_failed += 1
                _sample(healthy_reasons, error)
            elif not EXPECTED_WORDS[site.kind].search(error):
                wrong_words += 1
        elif r["outcome"] == 1:
            g["degraded"] += 1
            if site.healthy:
                healthy_degraded += 1
        if r["outcome"] != 2 and not site.healthy:
            failing_passed += 1
    for kind, seconds in took.items():
        ms = summary_ms(seconds)
        by_kind[kind]["total_ms"] = {"p50": ms["p50"], "p99": ms["p99"]}
    return {"by_kind": by_kind, "certificate_checks": cert, "healthy_failed": healthy_failed,
            "healthy_degraded": healthy_degraded, "healthy_failure_reasons": healthy_reasons,
            "failing_passed": failing_passed, "failures_with_unexpected_words": wrong_words}


def beyond_think(world: World, rows: list[Any]) -> dict[str, Any]:
    """What the uptime probes of healthy sites took beyond their server's think time, in
    ms (``p50``, ``p99``, ``max``, ``count``, and ``mean``): the connection, TLS, the body
    and any wait of the engine's own, such as its reactor's polling interval under load
    (engine/probes/reactor.py), which this figure shows side by side with the CPU it saves."""
    beyond = []
    for r in rows:
        i = index_of(r["host"])
        if i is None or i >= world.monitors or r["kind"] == 2 or r["total_ms"] is None:
            continue
        site = world.site(i)
        if site.healthy and r["outcome"] == 0:
            beyond.append((r["total_ms"] - site.think_ms) / 1000.0)
    out: dict[str, Any] = summary_ms(beyond)
    out["mean"] = round(1000.0 * sum(beyond) / len(beyond), 3) if beyond else None
    return out


def _sample(into: list[str], error: str) -> None:
    if len(into) < _SAMPLES and error not in into:
        into.append(error)


async def _inflight(b: Bench, world: World, certs: WorldCerts) -> dict[str, Any]:
    """RSS per in-flight HTTPS probe: the engine's prober holding K probes through nginx
    (handshake done, the backend never answers), spread over the four TLS kinds."""
    k = 100 if b.opts.quick else 1000
    port = world.https_port
    kinds = SERVER_KINDS
    cfg = {
        "warm_urls": [f"https://{ADDRESS[kinds[i % 4]]}:{port}/w/0/1024" for i in range(20)],
        "hang_urls": [f"https://{ADDRESS[kinds[i % 4]]}:{port}/w/900000/1024?{i}"
                      for i in range(k)],
        "cafile": str(certs.ca),
        "settle_max_s": 15.0,
    }
    child = await b.procs.spawn("inflight", "inflight", cfg, b.engine_cpus)
    try:
        return await b.wait(child, "result", f"internet: {k} HTTPS probes in flight", 5, 60)
    finally:
        await b.procs.stop(child)


async def _baseline(b: Bench, world: World, interval: float, timeout: float) -> dict[str, Any]:
    zero = {k: 0 for k in ("ok", "tls", "tls_hang", "slow", "hang", "refuse")}
    duration = b.opts.duration
    cfg = {"monitors": world.monitors, "ports": zero, "world": world.to_dict(),
           "dns_server": b.dns_address, "interval_s": interval, "warmup_s": b.opts.warmup,
           "duration_s": duration, "timeout_s": timeout}
    child = await b.procs.spawn("baseline", "baseline", cfg, b.engine_cpus)
    try:
        await b.wait(child, "loaded", "baseline: one task per monitor", 5, 300)
        return await b.wait(child, "result", "baseline: measuring", b.opts.warmup + duration)
    finally:
        await b.procs.stop(child)


async def _limits(b: Bench, world: World) -> dict[str, Any]:
    """wrk (Connection: close) against the plain-HTTP site (no think time, a 100 KB body:
    the world's mean)."""
    seconds = 1.0 if b.opts.quick else 3.0
    b.progress.phase("limit: wrk -H 'Connection: close' (plain HTTP)", seconds)
    wrk = await run_wrk(b.procs, f"http://{ADDRESS['http']}:{world.http_port}/w/0/102400",
                        seconds=seconds, connections=50, cpus=b.engine_cpus,
                        headers=["Connection: close"])
    return {"wrk": wrk.to_dict() if wrk is not None else None}




async def _dns_timeline(b: Bench, start: float, end: float) -> list[list[float]] | None:
    """The DNS server's answers per second and how late the latest went out (its cold start:
    a server that falls behind makes the resolver time out)."""
    if b.dns is None:
        return None
    b.dns.send(cmd="timeline", start=start, end=end)
    return list((await b.dns.expect("timeline", 10))["seconds"])


async def https_window(b: Bench, world: World, certs: WorldCerts, sampler: Sampler,
                       extra: dict[str, Any]) -> dict[str, Any]:
    """Step 2: the engine over a quarter of the healthy HTTPS monitors at a quarter of the
    interval (its checks alone enabled), with rounds of s_time right before and right after
    it (``--quick``: one round, after): the record's ``https_only``,
    ``https_cpu_s_per_probe``, ``s_time_rounds`` and the s_time figures and ratios."""
    https_n = await _only_https(b, world)
    # s_time runs as fast as nginx lets it and pays for each wait, so a database still
    # writing or vacuuming the first window's results on nginx's core would make the
    # rounds before dearer than those after (a busy loop there: +10-19 %).
    settled = 0.0
    if not b.opts.quick:
        b.progress.phase("waiting for the database to settle", DB_SETTLE_LIMIT_S)
        settled = await sampler.settle("database", DB_SETTLED_CORES, 2.0, DB_SETTLE_LIMIT_S)
    rounds = await s_time_rounds(b, world, certs, sampler, "before",
                                  0 if b.opts.quick else S_TIME_ROUNDS)
    ts2 = b.opts.time_scale / HTTPS_SHARE_SCALE
    # As long as the first window: at 10 s, two runs of the same tree read 802 and 952 us a
    # probe, and the ratios to s_time moved with them.
    w2 = Window("engine, HTTPS only", INTERVAL_S * ts2 + 1.0, b.opts.duration, ts2)
    res2 = await run_engine(b, w2, dns_warm_s=0.0, settings=extra, slices=HTTPS_SLICES)
    time_wait = time_wait_sockets()
    rounds += await s_time_rounds(b, world, certs, sampler, "after",
                                   1 if b.opts.quick else S_TIME_ROUNDS)
    p2 = sum(res2["probes"].values())
    failed2 = sum(v for k, v in res2["probes"].items() if not k.endswith(",ok"))
    tls2 = res2.get("tls") or {}
    slices = bracket.slice_costs(res2.get("slices") or [])
    only = {
        **sampler.window(res2["wall_start"], res2["wall_end"]),
        "monitors": https_n, "interval_s": INTERVAL_S * ts2,
        "probes_per_s": per(p2, res2["seconds"], 2), "not_ok": failed2,
        "cpu_s_per_probe": per(res2["cpu_s"], p2),
        "user_s_per_probe": per(res2.get("user_s"), p2),
        "sys_s_per_probe": per(res2.get("sys_s"), p2),
        "lateness_ms": res2["lateness_ms"],
        "tls_resumed_ratio": per(tls2.get("resumed"), tls2.get("handshakes"), 4),
        # The window in quarters: how steady the engine's own figure was.
        "slices": slices,
        "slice_cpu_s_per_probe": bracket.spread(s["cpu_s_per_probe"] for s in slices),
        "time_wait_at_end": time_wait,
        "database_settle_s": settled,
        "beyond_think_ms": beyond_think(
            world, await _rows(b, res2["wall_start"], res2["wall_end"])),
    }
    https = per(res2["cpu_s"], p2)
    out = {"https_only": only, "https_cpu_s_per_probe": https, "s_time_rounds": rounds,
           **s_time_figures(https, only["tls_resumed_ratio"], rounds, bracket.halves(slices))}
    cg_dir = b.opts.callgrind_dir
    if cg_dir is not None:  # --callgrind
        for key in ("instructions_per_probe", "instructions_per_answered_probe",
                    "callgrind_unanswered"):
            only[key] = res2.get(key)
        out.update(await s_time_instructions(b, world, cg_dir,
                                              only["instructions_per_answered_probe"]))
    return out




async def _measure(b: Bench, world: World, certs: WorldCerts, server: Nginx,
                   sampler: Sampler) -> dict[str, Any]:
    opts = b.opts
    n = world.monitors
    b.progress.phase(f"seeding {n:,} monitors", max(1.0, n / 20_000))
    await seed_world(b, world)
    sites = world.sites()
    kinds = Counter(s.kind for s in sites)
    interval = INTERVAL_S * opts.time_scale
    extra = {"ca_bundle": str(certs.ca)}
    rec: dict[str, Any] = {
        "scenario": "internet", "monitors": n, "duration_s": opts.duration,
        "interval_s": interval, "time_scale": opts.time_scale,
        "dns_latency_s": opts.dns_latency, "dns_ttl_s": opts.dns_ttl,
        "world": {"kinds": dict(kinds), "https_share": round(
            sum(1 for s in sites if s.tls) / n, 4) if n else None,
            "server_kinds": dict(Counter(s.server for s in sites if s.kind == "https"))},
    }
    checks = n + kinds["badcert"]

    if opts.https_only:
        # --https-only: step 2 alone, against s_time (the HTTPS ratios in under three
        # minutes; the sessions are made in the window's own warm-up).
        rec["https_only_run"] = True
        rec.update(await https_window(b, world, certs, sampler, extra))
        return rec

    # 1. The engine over the whole world, after whole intervals (--warmup-intervals, 2): the
    # first is the cold start, where every name is looked up, every TLS handshake is full
    # and every check makes its first transition (pending -> ok), each probe dearer than in
    # the steady state; the second lets a late start catch up. The warm-up timeline in the
    # record says, second by second, how the cold start went.
    w = Window("engine", interval * opts.warmup_intervals + 1.0, opts.duration,
               opts.time_scale)
    rec["warmup_s"] = w.warmup
    res = await run_engine(b, w, dns_warm_s=0.0, settings=extra)
    queries = await b.dns_queries(res["wall_start"], res["wall_end"])
    total_queries = await b.dns_queries(0.0, time.time())
    probes = sum(res["probes"].values())
    seconds = res["seconds"]
    rows = await _rows(b, res["wall_start"], res["wall_end"])
    firsts = sum(1 for r in rows if not r["confirmation"])
    outcomes = classify(world, rows)
    tls = res.get("tls") or {}
    rec.update({
        "probes_asked_per_s": round(checks / interval, 2),
        "probes_per_s": per(probes, seconds, 2),
        "held": per(firsts, checks * seconds / interval, 4),
        "confirmation_probes": sum(1 for r in rows if r["confirmation"]),
        "cpu_s_per_probe": per(res["cpu_s"], probes),
        "probes_per_cpu_s": per(probes, res["cpu_s"], 1),
        "cpu_utilization": per(res["cpu_s"], seconds, 3),
        "lateness_ms": res["lateness_ms"],
        "in_flight_at_end": res.get("in_flight_at_end"),
        "load_s": res["load_s"],
        "probes_by_outcome": res["probes"],
        **outcomes,
        "error_rate": per(outcomes["healthy_failed"],
                          sum(g["probes"] for k, g in outcomes["by_kind"].items()
                              if k not in FAILING_KINDS or k == "badcert"), 6),
        **dns_figures(res, queries),
        "dns_queries_per_probe_whole_run": per(total_queries, res.get("probes_all"), 6),
        "dns_queries_whole_run": total_queries,
        "tls_handshakes": tls.get("handshakes"),
        "tls_resumed": tls.get("resumed"),
        "tls_resumed_ratio": per(tls.get("resumed"), tls.get("handshakes"), 4),
        "tls_sessions_kept": tls.get("sessions_kept"),
        "rss_per_monitor_bytes": per(res["rss_loaded"] - res["rss_base"], n, 1),
        # The same, read as the engine sets ``loaded``, before its first probes start.
        "rss_per_monitor_before_probes_bytes": per(
            (res.get("rss_loaded_before_probes") or res["rss_base"]) - res["rss_base"], n, 1),
        "rss_per_monitor_with_names_bytes": per(
            res["rss_window_start"] - res["rss_base"], n, 1),
        "rss_mb": {"base": round(res["rss_base"] / 2**20, 1),
                   "loaded": round(res["rss_loaded"] / 2**20, 1),
                   "window_start": round(res["rss_window_start"] / 2**20, 1),
                   "end": round(res["rss_end"] / 2**20, 1)},
        "gc": res.get("gc"),
        **sampler.window(res["wall_start"], res["wall_end"]),
        # The cold start, a row a second (engine_run._warmup_timeline says the columns).
        "warmup_timeline": res.get("warmup"),
        "dns_server_timeline": await _dns_timeline(b, res["wall_start"] - w.warmup - 2,
                                                   res["wall_start"]),
    })

    if opts.load_only:
        # --load-only: the whole world's engine window alone (a what-if in two minutes).
        rec["load_only"] = True
        rec["targets"] = targets(rec)
        return rec

    # 2. Only healthy HTTPS monitors, the same HTTPS probes per second, bracketed by s_time.
    rec.update(await https_window(b, world, certs, sampler, extra))

    # 3. The naive baseline on the same names.
    timeout = float(b.settings()["probe_timeout"])
    base = await _baseline(b, world, interval, timeout)
    # "errors" of the baseline here: probes whose outcome was not the site's expected one.
    rec.update({"baseline_" + k: v for k, v in baseline_figures(base).items()})
    rec["baseline_unexpected_outcomes"] = base["errors"]
    rec["ratio_vs_baseline"] = ratio(rec["probes_per_cpu_s"], rec["baseline_probes_per_cpu_s"])

    # 3b. Memory per cached name: the idle monitor's figure plus its resolver entry.
    child = await b.procs.spawn("dnscache", "world_dnscache",
                                {"world": world.to_dict(), "dns_server": b.dns_address},
                                b.engine_cpus)
    try:
        cache = await b.wait(child, "result", f"internet: {n:,} names into the resolver",
                             5, 120)
    finally:
        await b.procs.stop(child)
    rec["dns_cache_bytes_per_name"] = cache["bytes_per_name"]
    rec["dns_cache_python_bytes_per_name"] = cache.get("python_bytes_per_name")
    # Idle: read before the engine's first sweep. The reading after the bench's waiter
    # wakes (rss_per_monitor_bytes) also holds the probes that sweep started: the same
    # code gave 745 and 993 B a monitor in two runs, the reading before them 734 and 732
    # (docs/performance.md). Both sums are in the record.
    def with_name(per_monitor: float | None) -> float | None:
        names = cache["bytes_per_name"]
        return (round(per_monitor + names, 1)
                if per_monitor is not None and names is not None else None)

    rec["rss_per_idle_monitor_with_name_bytes"] = with_name(
        rec["rss_per_monitor_before_probes_bytes"])
    rec["rss_per_monitor_with_name_after_wake_bytes"] = with_name(rec["rss_per_monitor_bytes"])

    # 4. Memory per in-flight HTTPS probe.
    inflight = await _inflight(b, world, certs)
    rec["https_inflight_bytes"] = inflight["bytes_per_probe"]
    rec["https_inflight_detail"] = inflight

    # 5. The plain-HTTP limit.
    limits = await _limits(b, world)
    limits["s_time"] = s_time_by_kind(rec["s_time_figures"], rec["s_time_rounds"])
    rec["limits"] = limits
    wrk = limits["wrk"]
    rec["limit_tool"] = "wrk / openssl s_time"
    rec["limit_per_s"] = wrk["per_s"] if wrk else None
    rec["limit_http_cpu_s_per_op"] = per(wrk["cpu_s"], wrk["operations"]) if wrk else None
    rec["ratio_vs_limit"] = rec["https_vs_s_time_new"]
    with contextlib.suppress(Exception):
        rec["nginx_pids"] = server.pids()
    rec["targets"] = targets(rec)
    return rec

