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
   the issue's targets (1.0x ``-new``, 1.2x ``-reuse``, and the two weighted by its share
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
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from upwatch_bench import bracket, layout, report
from upwatch_bench.certs import WorldCerts, make_world_certs
from upwatch_bench.database import seed_monitors
from upwatch_bench.harness import (
    Bench,
    BenchError,
    Window,
    baseline_figures,
    dns_figures,
    run_engine,
)
from upwatch_bench.limits import run_s_time, run_wrk
from upwatch_bench.nginx import Nginx, NginxUnavailable, ensure_nginx, nginx_conf
from upwatch_bench.stats import per, ratio, summary_ms, time_wait_sockets
from upwatch_bench.world import (
    ADDRESS,
    BODY_BYTES,
    EXPECTED_WORDS,
    FAILING_KINDS,
    KEY_TYPE,
    KINDS,
    SERVER_KINDS,
    ZONE,
    World,
    index_of,
)

INTERVAL_S = 60
HTTPS_SHARE_SCALE = 4  # step 2: a quarter of the HTTPS monitors at a quarter of the interval
_SAMPLES = 3  # distinct reason words kept per kind
MEAN_BODY = sum(BODY_BYTES) // 2  # the world's mean body (uniform sizes)
# s_time rounds on each side of the HTTPS-only window (--quick: one, after it), each run of a
# round ``-time 1`` (s_time counts whole seconds: a run lasts 1-2 s; its CPU and its
# connections are both counted exactly, so CPU per connection does not depend on it).
S_TIME_ROUNDS = 2
S_TIME_RUN_S = 1.0
# Under --callgrind: seconds of the short and the long s_time run per kind.
S_TIME_CALLGRIND_RUNS_S = (2, 6)
# What each s_time run of a round does: (mode, -reuse, -www of the mean page).
S_TIME_MODES = (("new", False, False), ("reuse", True, False), ("new_www", False, True),
                ("reuse_www", True, True))
# The kinds each mode runs against, whose mean is the mode's figure: without -www, s_time
# -reuse resumes TLS 1.2 only (it takes its session before a TLS 1.3 ticket arrives;
# i15-resume's section), so it is not run against TLS 1.3 (its figure there is None).
S_TIME_MEANS = {"new": SERVER_KINDS,
                "reuse": tuple(k for k in SERVER_KINDS if k.startswith("tls12")),
                "new_www": SERVER_KINDS, "reuse_www": SERVER_KINDS}
HTTPS_SLICES = 4  # the HTTPS-only window read in quarters too
# Before the first s_time rounds: the database below this many cores over 2 s (the HTTPS
# window's writes take ~0.04), waiting at most so long.
DB_SETTLED_CORES = 0.1
DB_SETTLE_LIMIT_S = 20.0


async def scenario_internet(b: Bench) -> dict[str, Any]:
    b.progress.phase("nginx: installing it if missing", 5)
    try:
        exe = await ensure_nginx()
    except NginxUnavailable as exc:
        raise BenchError(str(exc)) from None
    timeout = float(b.settings()["probe_timeout"])
    https_port = layout.free_port(ADDRESS["tls13-ecdsa"])
    http_port = https_port
    for _ in range(20):  # bounded: the kernel rarely hands the same port twice
        http_port = layout.free_port(ADDRESS["tls13-ecdsa"])
        if http_port != https_port:
            break
    world = World(b.opts.monitors, https_port, http_port, slow_ms=int((timeout + 2) * 1000))
    certs = make_world_certs(b.workdir / "world-certs", ZONE, ADDRESS,
                             {k: KEY_TYPE[k] for k in (*SERVER_KINDS, "badcert")},
                             expired=("badcert",))
    b.progress.phase("starting the world: backend, nginx, DNS", 3)
    backend_port = layout.free_port("127.0.0.1")
    backend = await b.procs.spawn(
        "world-backend", "world_backend",
        {"host": "127.0.0.1", "port": backend_port, "hang": [ADDRESS["hang"], https_port],
         "hang_cap_s": 900.0}, b.other_cpus)
    await backend.expect("ready", 30)
    server = Nginx(exe, b.workdir / "nginx")
    try:
        await server.start(nginx_conf(
            prefix=server.prefix, https_port=https_port, http_port=http_port,
            backend=f"127.0.0.1:{backend_port}", certs=certs.pairs,
            run_as_root=_is_root()), b.other_cpus)
        await wait_listening(server, world)
        server.pin()
        await b.start_dns([], ZONE, world=world.to_dict())
        dns = b.dns
        sampler = Sampler(lambda: {"nginx": server.pids(), "backend": [backend.pid],
                                   "dns": [dns.pid] if dns is not None else []},
                          b.db.cpu_seconds)
        sampling = asyncio.create_task(sampler.run())
        try:
            return await _measure(b, world, certs, server, sampler)
        finally:
            sampling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampling
    finally:
        await server.stop()


class Sampler:
    """Every half second: the busy share of each core (``/proc/stat``) and the CPU seconds of
    the world's processes (nginx, its backend, the DNS server, the database), so a window
    can say which side was saturated."""

    def __init__(self, pids: Callable[[], dict[str, list[int]]],
                 db_cpu: Callable[[], float | None]) -> None:
        self._pids = pids
        self._db_cpu = db_cpu
        self.samples: list[tuple[float, dict[str, tuple[float, float]], dict[str, float]]] = []

    @staticmethod
    def _cores() -> dict[str, tuple[float, float]]:
        out: dict[str, tuple[float, float]] = {}
        with contextlib.suppress(OSError), open("/proc/stat", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("cpu") and line[3:4].isdigit():
                    name, *fields = line.split()
                    values = [float(x) for x in fields[:8]]
                    out[name] = (sum(values) - values[3] - values[4], sum(values))
        return out

    def _processes(self) -> dict[str, float]:
        from upwatch_bench.database import CLK_TCK

        out: dict[str, float] = {}
        for name, pids in self._pids().items():
            total = 0.0
            for pid in pids:
                with contextlib.suppress(OSError, IndexError, ValueError):
                    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                    total += (int(fields[11]) + int(fields[12])) / CLK_TCK
            out[name] = total
        db = self._db_cpu()
        if db is not None:
            out["database"] = db
        return out

    async def run(self) -> None:
        while True:
            self.samples.append((time.time(), self._cores(), self._processes()))
            await asyncio.sleep(0.5)

    def recent_cores(self, name: str, seconds: float) -> float | None:
        """Cores process group ``name`` used over the last ``seconds`` of samples (None
        until there are two samples that far apart)."""
        if not self.samples:
            return None
        last = self.samples[-1]
        first = next((s for s in reversed(self.samples) if last[0] - s[0] >= seconds), None)
        if first is None or name not in last[2] or name not in first[2]:
            return None
        return (last[2][name] - first[2][name]) / (last[0] - first[0])

    async def settle(self, name: str, below: float, seconds: float, limit: float) -> float:
        """Wait, at most ``limit`` seconds, until ``name`` used fewer than ``below`` cores
        over the last ``seconds`` (not at all when it is not sampled: a database elsewhere);
        the seconds waited."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        while loop.time() - start < limit:
            if self.samples and name not in self.samples[-1][2]:
                break
            used = self.recent_cores(name, seconds)
            if used is not None and used < below:
                break
            await asyncio.sleep(0.5)  # the next sample; a bounded poll of a reading
        return round(loop.time() - start, 1)

    def window(self, start: float, end: float) -> dict[str, Any]:
        """Core busy shares and the processes' cores used between two wall times."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {}
        (t0, c0, p0), (t1, c1, p1) = inside[0], inside[-1]
        cores = {k: round((c1[k][0] - c0[k][0]) / (c1[k][1] - c0[k][1]), 3)
                 for k in c1 if k in c0 and c1[k][1] > c0[k][1]}
        procs = {k: round((p1[k] - p0.get(k, 0.0)) / (t1 - t0), 3) for k in p1}
        return {"cores_busy": cores, "world_cpu_cores": procs}


def _is_root() -> bool:
    import os

    return os.geteuid() == 0


def listen_points(world: World) -> list[tuple[str, int]]:
    """Every (address, port) nginx listens on."""
    points = [(ADDRESS[k], world.https_port) for k in (*SERVER_KINDS, "badcert")]
    points += [(ADDRESS[k], world.http_port) for k in (*SERVER_KINDS, "http")]
    return points


async def wait_listening(server: Nginx, world: World, seconds: float = 15.0) -> None:
    """Until every nginx socket accepts a connection (bounded); nginx's own words if not."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    for host, port in listen_points(world):
        while True:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2.0)
                writer.close()
                break
            except (OSError, TimeoutError):
                proc = server.proc
                if (proc is not None and proc.poll() is not None) or loop.time() > deadline:
                    raise RuntimeError(f"nginx does not listen on {host}:{port}: "
                                       + (server.log_tail()[-500:] or "no log")) from None
                await asyncio.sleep(0.05)


async def _seed(b: Bench, world: World) -> None:
    """Uptime checks for every monitor; the bad-certificate ones also get their certificate
    check (the uptime probe does not verify certificates, so that is where they fail). Two
    accounts: seed_monitors adds checks to every monitor of its account."""
    account, _ = await b.store.create_account("bench-internet")
    certs_account, _ = await b.store.create_account("bench-internet-certs")
    today = date.today()
    await b.store.ensure_result_partitions(today - timedelta(days=1), 3)
    urls = world.urls()
    bad = {s.index for s in world.sites() if s.kind == "badcert"}
    async with b.store.pool.acquire() as conn:
        await seed_monitors(conn, account.id, [u for i, u in enumerate(urls) if i not in bad],
                            uptime=True, certificate=False, interval=INTERVAL_S)
        if bad:
            await seed_monitors(conn, certs_account.id, [urls[i] for i in sorted(bad)],
                                uptime=True, certificate=True, interval=INTERVAL_S)


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


async def _s_time_round(b: Bench, world: World, certs: WorldCerts, sampler: Sampler,
                        side: str, reverse: bool) -> dict[str, Any]:
    """One round of s_time runs (every mode of S_TIME_MODES against every TLS server kind,
    ``reverse``: the kinds in the other order, so that a drift inside a round does not
    always fall on the same kind), pinned to the engine's core: per mode and kind the CPU
    per connection, the connections and how many resumed; the machine around it (the
    cores' busy shares, the world's processes, TIME_WAIT sockets at its start and end)."""
    page = f"/w/0/{MEAN_BODY}"
    kinds = SERVER_KINDS[::-1] if reverse else SERVER_KINDS
    cpu: dict[str, dict[str, float | None]] = {m[0]: {} for m in S_TIME_MODES}
    user: dict[str, dict[str, float | None]] = {m[0]: {} for m in S_TIME_MODES}
    system: dict[str, dict[str, float | None]] = {m[0]: {} for m in S_TIME_MODES}
    ops: dict[str, dict[str, int]] = {m[0]: {} for m in S_TIME_MODES}
    resumed: dict[str, dict[str, int | None]] = {m[0]: {} for m in S_TIME_MODES}
    wall0, tw0 = time.time(), time_wait_sockets()
    for kind in kinds:
        for mode, reuse, www in S_TIME_MODES:
            if kind not in S_TIME_MEANS[mode]:
                continue
            b.progress.phase(f"limit: openssl s_time -{mode} ({kind}), {side} the HTTPS "
                             "window", S_TIME_RUN_S + 0.5)
            tool = await run_s_time(b.procs, ADDRESS[kind], world.https_port,
                                    seconds=S_TIME_RUN_S, cpus=b.engine_cpus, cafile=certs.ca,
                                    reuse=reuse, www=page if www else None)
            cpu[mode][kind] = None if tool is None else per(tool.cpu_s, tool.operations)
            user[mode][kind] = None if tool is None else per(tool.user_s, tool.operations)
            system[mode][kind] = None if tool is None else per(tool.sys_s, tool.operations)
            ops[mode][kind] = 0 if tool is None else tool.operations
            resumed[mode][kind] = None if tool is None else tool.resumed
    wall1 = time.time()
    return {"side": side, "wall": [round(wall0, 3), round(wall1, 3)],
            "time_wait": [tw0, time_wait_sockets()], "cpu_s_per_op": cpu,
            "user_s_per_op": user, "sys_s_per_op": system,
            "operations": ops, "resumed": resumed, **sampler.window(wall0, wall1)}


async def _s_time_rounds(b: Bench, world: World, certs: WorldCerts, sampler: Sampler,
                         side: str, count: int) -> list[dict[str, Any]]:
    """``count`` rounds; the kinds' order alternates, mirrored after the window (before:
    forward, reversed; after: reversed, forward)."""
    first = side == "after"
    return [await _s_time_round(b, world, certs, sampler, side, (i % 2 == 0) == first)
            for i in range(count)]


def s_time_figures(https: float | None, share: float | None, rounds: list[dict[str, Any]],
                   halves: list[float | None] | None = None) -> dict[str, Any]:
    """The record's s_time figures and the HTTPS probe's ratios to them (``https``: its CPU
    per probe; ``share``: its resumed share; ``halves``: its CPU per probe in each half of
    its window) from the rounds bracketing its window: each mode's figure is the median
    over rounds of the round's mean over its kinds (S_TIME_MEANS), each kind's the median
    of its runs."""
    figs = bracket.aggregate(rounds, S_TIME_MEANS, SERVER_KINDS)
    new, reuse = figs["new"]["by_kind"], figs["reuse"]["by_kind"]
    new_www, reuse_www = figs["new_www"]["median"], figs["reuse_www"]["median"]
    out: dict[str, Any] = {
        "s_time_new_cpu_s": new,
        "s_time_reuse_cpu_s": reuse,
        # The engine's HTTPS probes spread evenly over the four kinds: against the kinds' mean.
        "https_vs_s_time_new": ratio(https, figs["new"]["median"]),
        "https_vs_s_time_new_by_kind": {k: ratio(https, v) for k, v in new.items()},
        "https_vs_s_time_reuse": ratio(https, figs["reuse"]["median"]),
        # Like with like: s_time fetching the world's mean page, full and resumed, weighted
        # by the HTTPS window's resumed share and by the targets (1.0x -new, 1.2x
        # -reuse).
        "s_time_www_path": f"/w/0/{MEAN_BODY}",
        "s_time_new_www_cpu_s": new_www,
        "s_time_reuse_www_cpu_s": reuse_www,
        "https_vs_s_time_new_www": ratio(https, new_www),
        "https_vs_s_time_reuse_www": ratio(https, reuse_www),
        "https_vs_s_time_www_targets": (
            ratio(https, (1 - share) * new_www + share * 1.2 * reuse_www)
            if share is not None and new_www is not None and reuse_www is not None
            else None),
        # User and kernel time apart (medians over rounds as above): where the probe's
        # surplus over s_time lies.
        "s_time_user_sys_s": {part: {m: f["median"] for m, f in bracket.aggregate(
            [{"side": r.get("side"), "cpu_s_per_op": r.get(f"{part}_s_per_op") or {}}
             for r in rounds], S_TIME_MEANS, SERVER_KINDS).items()}
            for part in ("user", "sys")},
        # Every round's figures, their spread, and the ratio to each side and each round.
        "s_time_figures": figs,
        "https_vs_s_time_rounds": bracket.ratios(https, figs, halves or []),
    }
    return out


def s_time_by_kind(figs: dict[str, Any], rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per TLS server kind and s_time mode: the median CPU per connection over the rounds,
    and the connections made and resumed in all of them."""
    return {kind: {mode: {"cpu_s_per_op": figs[mode]["by_kind"][kind],
                          "operations": sum(r["operations"][mode].get(kind) or 0
                                            for r in rounds),
                          "resumed": sum(r["resumed"][mode].get(kind) or 0 for r in rounds)}
                   for mode, _, _ in S_TIME_MODES}
            for kind in SERVER_KINDS}


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
    rounds = await _s_time_rounds(b, world, certs, sampler, "before",
                                  0 if b.opts.quick else S_TIME_ROUNDS)
    ts2 = b.opts.time_scale / HTTPS_SHARE_SCALE
    # As long as the first window: at 10 s, two runs of the same tree read 802 and 952 us a
    # probe, and the ratios to s_time moved with them.
    w2 = Window("engine, HTTPS only", INTERVAL_S * ts2 + 1.0, b.opts.duration, ts2)
    res2 = await run_engine(b, w2, dns_warm_s=0.0, settings=extra, slices=HTTPS_SLICES)
    time_wait = time_wait_sockets()
    rounds += await _s_time_rounds(b, world, certs, sampler, "after",
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
        out.update(await _s_time_instructions(b, world, cg_dir,
                                              only["instructions_per_answered_probe"]))
    return out


async def _s_time_instructions(b: Bench, world: World, directory: Path,
                               probe: int | None) -> dict[str, Any]:
    """Under ``--callgrind``: ``s_time -reuse -www`` of the world's mean page,
    under callgrind against each TLS server kind, and the HTTPS-only window's instructions
    per answered probe against their mean (its probes spread evenly over the kinds, as in
    s_time_figures). Instructions do not move with the machine's load as its CPU seconds
    do; they do not see the kernel or cache misses. ``GLIBC_TUNABLES`` set to
    ``tlsinstr.VECTOR_COPIES`` for the whole bench counts copies alike on both sides."""
    from upwatch_bench.lab.tlsinstr import STimeFailed, measure_s_time

    page = f"/w/0/{MEAN_BODY}"
    by_kind: dict[str, dict[str, Any] | None] = {}
    failed: dict[str, str] = {}
    for kind in SERVER_KINDS:
        b.progress.phase(f"s_time -reuse -www ({kind}) under callgrind", 40)
        try:
            by_kind[kind] = await asyncio.to_thread(
                measure_s_time, world.https_port, "reuse", page, S_TIME_CALLGRIND_RUNS_S,
                directory, f"reuse-www-{kind}", ADDRESS[kind])
        except STimeFailed as e:  # recorded, not fatal to the rest of the run
            by_kind[kind] = None
            failed[kind] = str(e)
    return {**s_time_instruction_figures(by_kind, probe),
            "s_time_reuse_www_instructions_failed": failed}


def s_time_instruction_figures(by_kind: dict[str, dict[str, Any] | None],
                               probe: int | None) -> dict[str, Any]:
    """The record's figures from ``s_time -reuse -www`` under callgrind per server kind
    (None: that run failed) and the probe's instructions: the mean over the kinds (None
    unless every kind was measured) and the probe's ratio to it."""
    runs = [v for v in by_kind.values() if v is not None]
    mean = bracket.complete_mean(None if (v := by_kind.get(k)) is None else v["instructions"]
                                 for k in SERVER_KINDS)
    return {"s_time_reuse_www_instructions": by_kind,
            "s_time_reuse_www_instructions_mean": None if mean is None else round(mean),
            # Connections counted and how many of them resumed (all, unless a server
            # refused a ticket).
            "s_time_reuse_www_instructions_resumed": [sum(v["resumed"] for v in runs),
                                                      sum(v["connections"] for v in runs)],
            "https_instructions_vs_s_time_reuse_www": ratio(probe, mean)}


async def _measure(b: Bench, world: World, certs: WorldCerts, server: Nginx,
                   sampler: Sampler) -> dict[str, Any]:
    opts = b.opts
    n = world.monitors
    b.progress.phase(f"seeding {n:,} monitors", max(1.0, n / 20_000))
    await _seed(b, world)
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
    # (engine/bench/RESULTS.md, "RSS per idle monitor"). Both sums are in the record.
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


def targets(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 15's targets for the internet world."""
    t = report.target
    ttl = max(1.0, float(rec.get("dns_ttl_s") or 300))
    interval = float(rec.get("interval_s") or INTERVAL_S) / max(1e-9, rec.get("time_scale", 1))
    lat = rec.get("lateness_ms") or {}
    return [
        t("healthy probes failed", rec.get("healthy_failed"), "==", 0),
        t("held (first probes done / asked)", rec.get("held"), ">=", 0.98),
        t("scheduler lateness p99", lat.get("p99"), "<", 100.0, "ms"),
        t("engine CPU (cores)", rec.get("cpu_utilization"), "<", 1.0),
        t("vs baseline, per CPU s", rec.get("ratio_vs_baseline"), ">=", 5.0, "x"),
        t("RSS per idle monitor incl. its cache entry", rec.get(
            "rss_per_idle_monitor_with_name_bytes"), "<=", 1024, "B"),
        t("RSS per in-flight HTTPS probe", rec.get("https_inflight_bytes"), "<=", 100_000, "B"),
        t("HTTPS probe CPU vs s_time -new", rec.get("https_vs_s_time_new"), "<=", 1.0, "x"),
        t("HTTPS probe CPU vs s_time -reuse (TLS 1.2)", rec.get("https_vs_s_time_reuse"), "<=",
          1.2, "x"),
        t("HTTPS probe CPU vs s_time -www (same page; 1.0x -new, 1.2x -reuse, by resumed share)",
          rec.get("https_vs_s_time_www_targets"), "<=", 1.0, "x"),
        t("DNS questions per probe (A and AAAA once per TTL)",
          rec.get("dns_queries_per_probe"), "<=", round(2 * interval / ttl, 4)),
    ]


def table(rec: dict[str, Any]) -> str:
    """The readable report of one internet run."""
    from upwatch_bench.report import fmt, lat_text, targets_text

    lines = [f"== upwatch bench internet: {rec['monitors']:,} monitors at "
             f"{fmt(rec.get('interval_s'))} s, DNS {fmt(rec.get('dns_latency_s'))} s away "
             f"(TTL {rec.get('dns_ttl_s')} s), {rec['duration_s']:g} s measured =="]

    def row(label: str, value: str) -> None:
        lines.append(f"  {label:<44} {value}")  # a space even after a long label

    row("probes/s asked / done", f"{fmt(rec.get('probes_asked_per_s'))} / "
        f"{fmt(rec.get('probes_per_s'))} (held {fmt(rec.get('held'))})")
    row("CPU per probe (all / HTTPS only)", f"{fmt(rec.get('cpu_s_per_probe'), 's')} / "
        f"{fmt(rec.get('https_cpu_s_per_probe'), 's')}")
    row("engine CPU (cores)", fmt(rec.get("cpu_utilization")))
    row("lateness p50 / p99 / max", lat_text(rec.get("lateness_ms")))
    row("in flight at the end", fmt(rec.get("in_flight_at_end")))
    row("cores busy (window)", ", ".join(
        f"{k} {fmt(v)}" for k, v in (rec.get("cores_busy") or {}).items()))
    row("world's processes (cores)", ", ".join(
        f"{k} {fmt(v)}" for k, v in (rec.get("world_cpu_cores") or {}).items()))
    row("healthy failed / degraded", f"{rec.get('healthy_failed')} / "
        f"{rec.get('healthy_degraded')} {rec.get('healthy_failure_reasons') or ''}")
    for kind, g in (rec.get("by_kind") or {}).items():
        took = g.get("total_ms") or {}
        row(f"  {kind}: failed / probes (confirmations)",
            f"{g['failed']} / {g['probes']} ({g.get('confirmations')}), took p50/p99 "
            f"{fmt(took.get('p50'))}/{fmt(took.get('p99'))} ms {g['reasons'][:1]}")
    cert = rec.get("certificate_checks") or {}
    row("  badcert certificate checks failed", f"{cert.get('failed')} / {cert.get('probes')} "
        f"{(cert.get('reasons') or [])[:1]}")
    row("DNS questions per probe (window / run)", f"{fmt(rec.get('dns_queries_per_probe'))} / "
        f"{fmt(rec.get('dns_queries_per_probe_whole_run'))}")
    row("DNS cache hit ratio", fmt(rec.get("dns_cache_hit_ratio")))
    row("TLS resumed ratio", f"{fmt(rec.get('tls_resumed_ratio'))} "
        f"({rec.get('tls_resumed')} of {rec.get('tls_handshakes')})")
    row("RSS per monitor: idle + cached name = sum",
        f"{fmt(rec.get('rss_per_monitor_before_probes_bytes'), 'B')} + "
        f"{fmt(rec.get('dns_cache_bytes_per_name'), 'B')} = "
        f"{fmt(rec.get('rss_per_idle_monitor_with_name_bytes'), 'B')}")
    row("  read after the first sweep's probes",
        f"{fmt(rec.get('rss_per_monitor_bytes'), 'B')} + ... = "
        f"{fmt(rec.get('rss_per_monitor_with_name_after_wake_bytes'), 'B')}")
    row("RSS per monitor at the window's start (all)",
        fmt(rec.get("rss_per_monitor_with_names_bytes"), "B"))
    row("RSS per in-flight HTTPS probe", fmt(rec.get("https_inflight_bytes"), "B"))
    row("baseline: CPU per good probe, good/s", f"{fmt(rec.get('baseline_cpu_s_per_probe'), 's')}"
        f", {fmt(rec.get('baseline_good_probes_per_s'))}/s")
    row("engine vs baseline per CPU s", f"{fmt(rec.get('ratio_vs_baseline'))}x")
    row("wrk Connection: close, CPU per request", fmt(rec.get("limit_http_cpu_s_per_op"), "s"))
    for kind in SERVER_KINDS:
        row(f"s_time {kind} -new / -reuse CPU per op",
            f"{fmt((rec.get('s_time_new_cpu_s') or {}).get(kind), 's')} / "
            f"{fmt((rec.get('s_time_reuse_cpu_s') or {}).get(kind), 's')}")
    row("HTTPS probe vs s_time -new / -reuse", f"{fmt(rec.get('https_vs_s_time_new'))}x / "
        f"{fmt(rec.get('https_vs_s_time_reuse'))}x")
    row(f"s_time -www {rec.get('s_time_www_path')} -new / -reuse (mean)",
        f"{fmt(rec.get('s_time_new_www_cpu_s'), 's')} / "
        f"{fmt(rec.get('s_time_reuse_www_cpu_s'), 's')}")
    row("HTTPS probe vs s_time -www -new / -reuse / targets",
        f"{fmt(rec.get('https_vs_s_time_new_www'))}x / "
        f"{fmt(rec.get('https_vs_s_time_reuse_www'))}x / "
        f"{fmt(rec.get('https_vs_s_time_www_targets'))}x")
    parts = rec.get("s_time_user_sys_s") or {}
    only = rec.get("https_only") or {}
    row("user / kernel CPU: HTTPS probe; s_time -reuse -www",
        f"{fmt(only.get('user_s_per_probe'), 's')} / {fmt(only.get('sys_s_per_probe'), 's')}; "
        f"{fmt((parts.get('user') or {}).get('reuse_www'), 's')} / "
        f"{fmt((parts.get('sys') or {}).get('reuse_www'), 's')}")
    figs = rec.get("s_time_figures") or {}
    by_round = rec.get("https_vs_s_time_rounds") or {}
    for mode in ("new_www", "reuse_www"):
        fig, rat = figs.get(mode) or {}, by_round.get(mode) or {}
        row(f"  -{mode} rounds: min-max (spread, n)",
            f"{fmt(fig.get('min'), 's')} - {fmt(fig.get('max'), 's')} "
            f"({fmt(fig.get('spread'))}, {fig.get('n')})")
        row(f"  probe vs -{mode}: before/after/each",
            f"{fmt(rat.get('before'))}x / {fmt(rat.get('after'))}x / "
            + ", ".join(f"{fmt(v)}" for v in rat.get("rounds") or []))
    if only.get("instructions_per_answered_probe") is not None:  # --callgrind
        mean = rec.get("s_time_reuse_www_instructions_mean")
        row("instructions: HTTPS probe / s_time -reuse -www (mean)",
            f"{only['instructions_per_answered_probe']:,} / "
            f"{'-' if mean is None else format(mean, ',')} = "
            f"{fmt(rec.get('https_instructions_vs_s_time_reuse_www'))}x (s_time resumed "
            + " of ".join(str(n) for n in rec.get("s_time_reuse_www_instructions_resumed")
                          or ()) + ")")
    bt = only.get("beyond_think_ms") or {}
    row("HTTPS probe's time beyond think: p50 / mean / p99",
        f"{fmt(bt.get('p50'))} / {fmt(bt.get('mean'))} / {fmt(bt.get('p99'))} ms")
    sl = only.get("slice_cpu_s_per_probe") or {}
    row("HTTPS-only window in quarters: CPU a probe",
        f"{fmt(sl.get('min'), 's')} - {fmt(sl.get('max'), 's')} "
        f"(spread {fmt(sl.get('spread'))})")
    for note in rec.get("notes") or []:
        lines.append(f"  note: {note}")
    lines += targets_text(rec.get("targets") or [])
    return "\n".join(lines)
