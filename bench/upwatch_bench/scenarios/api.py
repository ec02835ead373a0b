"""``upwatch bench api``: ``create_app`` on one core: GET /webapi/monitors/{id} and GET
/webapi/monitors with N monitors (1,000); statistics and timings latency with 30 days of
history; POST /webapi/monitors at concurrency 1, 8 and 32; ``upwatch apply`` and
``upwatch export`` of 10,000 monitors."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from upwatch_bench import layout, report
from upwatch_bench.database import seed_history, seed_monitors
from upwatch_bench.harness import INTERVAL_S, Bench, BenchError
from upwatch_bench.limits import run_wrk, write_id_script
from upwatch_bench.stats import per


async def _settle_history(conn: Any) -> None:
    """Vacuum the seeded rollups, as autovacuum has long done to a real 30-day history: the
    figures are index-only scans, which read the heap for pages not yet marked all-visible.
    The checkpoint first: the embedded server commits asynchronously, and VACUUM marks no
    page all-visible while the inserting commit is not yet flushed."""
    import asyncpg

    try:
        await conn.execute("CHECKPOINT")
    except asyncpg.InsufficientPrivilegeError:
        await asyncio.sleep(1.0)  # the WAL writer flushes within wal_writer_delay (200 ms)
    await conn.execute("VACUUM (ANALYZE) check_rollups_hourly")


CREATE_CONCURRENCY = 8  # the concurrency of create_monitor_rps and create_monitor_ms
CREATE_CONCURRENCIES = (1, CREATE_CONCURRENCY, 32)


async def _measure_creates(b: Bench, base: str, ports: Any, mark: Any) -> dict[str, Any]:
    """``POST /webapi/monitors`` from one account at concurrency 1, 8 and 32 (a fresh
    account each, monitors an hour apart so nothing is due), with the embedded server's
    fsync and synchronous commit on: a 201 means a durable commit, as in the service."""
    durable = await b.db.set_durable(True)
    if not durable:
        b.notes.append("creates measured on an external server, durable as it is configured")
    seconds = min(b.opts.duration, 10.0)
    out: dict[str, Any] = {"by_concurrency": {}, "errors": 0, "durable": durable or None}
    try:
        for c in CREATE_CONCURRENCIES:
            _account, token = await b.store.create_account(f"bench-create-{c}")
            b.progress.phase(f"api: POST /webapi/monitors at concurrency {c}", seconds)
            db0 = b.db.cpu_seconds()
            before = await mark(f"create-{c}-start")
            gen = await b.procs.spawn(
                f"creates-{c}", "loadgen",
                {"urls": [base + "/webapi/monitors"],
                 "headers": {"Authorization": f"Bearer {token}"},
                 "create_url_prefix": f"http://{layout.HEALTHY_HOSTS[0]}:{ports.ok}/c{c}/",
                 "create_fields": {"interval": 3600},
                 "concurrency": c, "duration_s": seconds}, b.other_cpus)
            try:
                res = await gen.expect("result", seconds + 60, tick=b.progress.tick)
            finally:
                await b.procs.stop(gen)
            after = await mark(f"create-{c}-end")
            db1 = b.db.cpu_seconds()
            lat = res["latency_ms"]
            n = res["requests"]
            out["by_concurrency"][str(c)] = {
                "rps": round(res["rps"] or 0.0, 1), "p50": lat["p50"], "p99": lat["p99"],
                "requests": n, "errors": res["errors"],
                # Includes the load generator's start-up and warm-up requests: an upper
                # bound, good for comparing runs.
                "api_cpu_s_per_create": per(after["cpu_s"] - before["cpu_s"], n),
                "db_cpu_s_per_create": per(db1 - db0, n) if db0 is not None and db1 else None}
            out["errors"] += res["errors"]
        out["apply"] = await _measure_apply(b, ports)
    finally:
        if durable:
            await b.db.set_durable(False)
    return out


async def _cli(b: Bench, *args: str, timeout: float = 120) -> tuple[float, float]:
    """Run ``upwatch ARGS`` against the bench database, pinned to the measured core, as an
    operator would beside the service; its wall time and CPU time (user + system) in
    seconds, start-up included. On a busy machine the CPU time is the steadier figure."""
    import resource

    from upwatch_bench.procs import pin_pid

    def children_cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    cpu0 = children_cpu()

    env = {k: v for k, v in os.environ.items() if not k.startswith("UPWATCH_")}
    env.update(UPWATCH_DATABASE_URL=b.db.dsn, UPWATCH_ALLOW_PRIVATE_TARGETS="true",
               UPWATCH_DATA_DIR=str(b.workdir / "cli"), UPWATCH_LOG_LEVEL="WARNING")
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "engine", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    with contextlib.suppress(OSError):
        pin_pid(proc.pid, b.engine_cpus)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise BenchError(f"upwatch {args[0]} did not finish in {timeout:.0f} s") from None
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise BenchError(f"upwatch {' '.join(args[:1])}: exit {proc.returncode}: "
                         f"{err.decode(errors='replace')[-500:]}")
    return seconds, children_cpu() - cpu0


async def _measure_apply(b: Bench, ports: Any) -> dict[str, Any]:
    """``upwatch apply`` of a file of N monitors (10,000; --quick 1,000) to a fresh account,
    then of the same file again (nothing to write), then ``upwatch export``; wall seconds
    of each process, start-up included."""
    from engine.monitors.file import render_toml

    n = 1000 if b.opts.quick else 10_000
    account, _ = await b.store.create_account("bench-apply")
    doc = {"monitors": [
        {"key": f"site-{i}", "url": layout.monitor_url(i, ports), "alias": f"site {i}",
         "uptime": {"interval": 3600, "notification_threshold": 60},
         "certificate_health": {"interval": 86400, "expiry_threshold_days": 14,
                                "enabled": i % 2 == 0}}
        for i in range(n)]}
    path = b.workdir / "monitors.toml"
    path.write_text(render_toml(doc), encoding="utf-8")
    b.progress.phase(f"api: upwatch apply of {n:,} monitors", 10)
    first = await _cli(b, "apply", str(path), "--account", str(account.id))
    made = await b.store.count_monitors(account.id)
    if made != n:
        raise BenchError(f"upwatch apply made {made} monitors of {n}")
    b.progress.phase(f"api: upwatch apply of the same {n:,} monitors again", 3)
    again = await _cli(b, "apply", str(path), "--account", str(account.id))
    b.progress.phase(f"api: upwatch export of {n:,} monitors", 3)
    exported = await _cli(b, "export", "--account", str(account.id), str(b.workdir / "out.toml"))
    return {"monitors": n, "apply_s": round(first[0], 2),
            "reapply_unchanged_s": round(again[0], 2), "export_s": round(exported[0], 2),
            "apply_cpu_s": round(first[1], 2), "reapply_unchanged_cpu_s": round(again[1], 2),
            "export_cpu_s": round(exported[1], 2)}


async def _roll_phase_history(b: Bench, conn: Any) -> int:
    """The phase roll-up job over the seeded 30 days of raw results, as it would have run
    hour by hour (the same store method, from a progress mark 31 days back)."""
    from engine.db.rollups import GRACE

    await conn.execute("UPDATE phase_rollup_progress"
                       " SET rolled_until = date_trunc('hour', now(), 'UTC') - interval '31 days',"
                       " days_rolled_until = date_trunc('day', now(), 'UTC') - interval '31 days'")
    rolled = await b.store.roll_phase_timings(datetime.now(UTC), grace=GRACE, max_hours=800)
    await conn.execute("VACUUM (ANALYZE) check_phase_rollups_hourly, check_phase_rollups_daily")
    return rolled


async def scenario_api(b: Bench) -> dict[str, Any]:
    import aiohttp

    opts = b.opts
    m = opts.monitors
    ports = layout.pick_ports()  # URLs only: nothing is probed in this scenario
    account, token = await b.store.create_account("bench-api")
    today = date.today()
    b.progress.phase(f"seeding {m:,} monitors with 30 days of history", max(2.0, m / 200))
    await b.store.ensure_result_partitions(today - timedelta(days=31), 33)
    async with b.store.pool.acquire() as conn:
        await seed_monitors(conn, account.id, layout.monitor_urls(m, ports), uptime=True,
                            certificate=True, interval=INTERVAL_S, period_days=31)
        ids = [r["id"] for r in await conn.fetch(
            "SELECT id FROM monitors WHERE account_id = $1 ORDER BY id", account.id)]
        stats_monitor = ids[0]
        stats_check = await conn.fetchval(
            "SELECT id FROM checks WHERE monitor_id = $1 AND kind = 'uptime'", stats_monitor)
        history = await seed_history(conn, account.id, stats_check, days=30)
        history["phase_hours_rolled"] = await _roll_phase_history(b, conn)
        await _settle_history(conn)

    port = layout.free_port(layout.API_HOST)
    base = f"http://{layout.API_HOST}:{port}"
    cprofile_dir = str(opts.cprofile_dir) if opts.cprofile_dir is not None else None
    if cprofile_dir:
        os.makedirs(cprofile_dir, exist_ok=True)
    server = await b.procs.spawn(
        "apiserver", "apiserver",
        {"dsn": b.db.dsn, "host": layout.API_HOST, "port": port,
         # A plan limit above what the create runs make (the default stops at 10,000).
         "settings": b.settings(rate_limit_per_second=0, base_url=base, port=port,
                                plans={"default": {"monitor_limit": 1_000_000}}),
         "cprofile": cprofile_dir},
        b.engine_cpus)
    await server.expect("ready", 60)
    auth = f"Bearer {token}"
    # Fail early, with the API's own words, if a request does not work at all.
    async with aiohttp.ClientSession(headers={"Authorization": auth}) as session:
        for path in (f"/webapi/monitors/{stats_monitor}", "/webapi/monitors",
                     f"/webapi/monitors/{stats_monitor}/statistics"):
            async with session.get(base + path) as resp:
                if resp.status != 200:
                    raise BenchError(f"GET {path}: {resp.status} {(await resp.text())[:300]}")

    async def mark(tag: str) -> dict[str, Any]:
        server.send(cmd="mark", tag=tag)
        return await server.expect("mark", 30)

    db_cpu: dict[str, float | None] = {}

    async def load(path_or_script: Any, connections: int, label: str) -> tuple[float, int, float]:
        """(requests per second, errors, API CPU s per request) of one load run; the
        database's CPU per request goes into ``db_cpu``."""
        b.progress.phase(label, opts.duration)
        what = "get" if isinstance(path_or_script, Path) else "list"
        db0 = b.db.cpu_seconds()
        before = await mark(f"{what}-start")
        if isinstance(path_or_script, Path):
            tool = await run_wrk(b.procs, base + "/", seconds=opts.duration,
                                 connections=connections, cpus=b.other_cpus,
                                 headers=[f"Authorization: {auth}"], script=path_or_script)
        else:
            tool = await run_wrk(b.procs, base + path_or_script, seconds=opts.duration,
                                 connections=connections, cpus=b.other_cpus,
                                 headers=[f"Authorization: {auth}"])
        if tool is not None:
            after = await mark(f"{what}-end")
            db1 = b.db.cpu_seconds()
            db_cpu[what] = per(db1 - db0, tool.operations) if db0 is not None and db1 else None
            db_cpu[what + "_client"] = per(tool.cpu_s, tool.operations)
            rps = tool.per_s or 0.0
            return rps, tool.errors, per(after["cpu_s"] - before["cpu_s"], tool.operations) or 0.0
        # No wrk: the aiohttp load generator in another process.
        urls = ([f"{base}/webapi/monitors/{i}" for i in ids]
                if isinstance(path_or_script, Path) else [base + path_or_script])
        gen = await b.procs.spawn("loadgen", "loadgen",
                                  {"urls": urls, "headers": {"Authorization": auth},
                                   "concurrency": connections, "duration_s": opts.duration},
                                  b.other_cpus)
        try:
            res = await gen.expect("result", opts.duration + 60, tick=b.progress.tick)
        finally:
            await b.procs.stop(gen)
        after = await mark(f"{what}-end")
        return (res["rps"] or 0.0, res["errors"],
                per(after["cpu_s"] - before["cpu_s"], res["requests"]) or 0.0)

    script = write_id_script(b.workdir / "monitor_ids.lua", "/webapi/monitors/", ids)
    get_rps, get_errors, get_cpu = await load(script, 32, "api: GET /webapi/monitors/{id}")
    list_rps, list_errors, list_cpu = await load("/webapi/monitors", 4, "api: GET /webapi/monitors")
    async def one_at_a_time(name: str, what: str, path: str) -> dict[str, Any]:
        """Latency of ``path`` requested one at a time (the load generator's result)."""
        b.progress.phase(f"api: {what} latency, one request at a time", opts.duration)
        gen = await b.procs.spawn(
            name, "loadgen",
            {"urls": [f"{base}/webapi/monitors/{stats_monitor}/{path}"],
             "headers": {"Authorization": auth}, "concurrency": 1, "duration_s": opts.duration,
             "max_requests": 5000}, b.other_cpus)
        try:
            result: dict[str, Any] = await gen.expect(
                "result", opts.duration + 60, tick=b.progress.tick)
        finally:
            await b.procs.stop(gen)
        return result

    stats = await one_at_a_time("statistics", "statistics", "statistics")
    timings = await one_at_a_time("timings", "timings (30 days)", "timings?period=30d")
    creates = await _measure_creates(b, base, ports, mark)
    by_c = creates["by_concurrency"]
    from upwatch_bench.limits import wrk_available

    rec: dict[str, Any] = {
        "scenario": "api", "monitors": m, "duration_s": opts.duration,
        "get_monitor_rps": round(get_rps, 1),
        "list_monitors_rps": round(list_rps, 1),
        "statistics_ms": {"p50": stats["latency_ms"]["p50"], "p99": stats["latency_ms"]["p99"]},
        "statistics_requests": stats["requests"],
        "timings_ms": {"p50": timings["latency_ms"]["p50"],
                       "p99": timings["latency_ms"]["p99"]},
        "timings_requests": timings["requests"],
        "cpu_s_per_get": get_cpu, "cpu_s_per_list": list_cpu,
        "db_cpu_s_per_get": db_cpu.get("get"), "db_cpu_s_per_list": db_cpu.get("list"),
        "load_tool_cpu_s_per_get": db_cpu.get("get_client"),
        "create_monitor_rps": by_c[str(CREATE_CONCURRENCY)]["rps"],
        "create_monitor_ms": {k: by_c[str(CREATE_CONCURRENCY)][k] for k in ("p50", "p99")},
        "create_monitor_by_concurrency": by_c,
        "create_monitor_durable": creates["durable"],
        "apply": creates["apply"],
        "errors": get_errors + list_errors + stats["errors"] + timings["errors"]
                  + creates["errors"],
        "load_tool": "wrk" if wrk_available() else "aiohttp load generator",
        "history": history,
        "probes_per_s": None, "cpu_s_per_probe": None, "lateness_ms": None,
        "rss_per_monitor_bytes": None, "error_rate": None,
        "baseline_probes_per_s": None, "baseline_cpu_s_per_probe": None,
        "limit_per_s": None, "ratio_vs_limit": None, "ratio_vs_baseline": None,
    }
    rec["targets"] = report.api_targets(rec)
    return rec
