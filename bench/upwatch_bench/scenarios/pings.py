"""``upwatch bench pings``: heartbeat pings answered by a whole node (``upwatch run``'s
default: the engine and the API on one loop, one core) while the same process probes N URL
monitors (default 5,000; ``--quick``: 300) of local healthy targets at their 30 s interval.

What runs: N URL monitors and H heartbeats (2,000; ``--quick``: 200; a period of a day, so
no deadline falls) are seeded; the node starts and warms up for one interval; then ``wrk``
(one thread, 32 connections, ``--duration`` seconds each, default 30) sends ``GET
/ping/<uuid>`` to heartbeats drawn at random, with HTTP keep-alive on and then off
(``Connection: close``). Readings: pings answered per second and their p50/p99 latency per
run; the pings answered 200 against the rows of ``heartbeat_pings`` (every answered ping
must be in the database: the answer waits for its commit); the URL checks' start lateness
over both runs from their result rows, as the probe scenarios read it.

Targets: at least 2,000 pings/s, p99 under 50 ms, no answered ping missing, URL probes on
time (every URL check probed at least once per two intervals, 99 % of them).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path
from typing import Any

from upwatch_bench import layout
from upwatch_bench.database import seed_monitors
from upwatch_bench.gaps import probe_gaps
from upwatch_bench.harness import INTERVAL_S, Bench, row_lateness
from upwatch_bench.install import ensure_installed
from upwatch_bench.limits import run_wrk, wrk_available
from upwatch_bench.stats import process_cpu_s

CONNECTIONS = 32
TARGET_PINGS_PER_S = 2000.0
TARGET_P99_MS = 50.0
HEARTBEAT_SQL = """
WITH m AS (
    INSERT INTO monitors (account_id, identifier, alias, url, scheme, host, port)
    SELECT $1, 'hb' || i || '-' || $3::text, 'beat ' || i, '', 'heartbeat', '', ''
    FROM generate_series(1, $2::int) AS i
    RETURNING id
), c AS (
    INSERT INTO checks (monitor_id, kind, interval_s, notification_threshold_s, is_enabled,
                        status, recovery_threshold_s)
    SELECT id, 'heartbeat', 86400, 0, true, 'pending', 0 FROM m
    RETURNING id
), p AS (
    INSERT INTO check_periods (check_id, started_at) SELECT id, clock_timestamp() FROM c
)
INSERT INTO heartbeats (check_id, account_id, ping_uuid, period_s, grace_s)
SELECT id, $1, gen_random_uuid(), 86400, 3600 FROM c
RETURNING ping_uuid::text
"""


async def seed_heartbeats(conn: Any, account_id: int, n: int) -> list[str]:
    """``n`` heartbeats of the account (pending, a ping a day, an hour's grace), set-based;
    their ping ids."""
    tag = uuid.uuid4().hex[:8]
    rows = await conn.fetch(HEARTBEAT_SQL, account_id, n, tag)
    await conn.execute("ANALYZE monitors; ANALYZE checks; ANALYZE heartbeats")
    return [r["ping_uuid"] for r in rows]


def write_ping_script(path: Path, ids: list[str], *, keep_alive: bool) -> Path:
    """A wrk Lua script pinging ``/ping/<uuid>`` of heartbeats drawn at random."""
    listing = ",".join(f'"{i}"' for i in ids)
    header = "" if keep_alive else 'wrk.headers["Connection"] = "close"\n'
    path.write_text(
        f"local ids = {{{listing}}}\n"
        "math.randomseed(7)\n"
        f"{header}"
        "request = function()\n"
        '  return wrk.format("GET", "/ping/" .. ids[math.random(#ids)])\n'
        "end\n",
        encoding="ascii",
    )
    return path


@contextlib.asynccontextmanager
async def node(b: Bench, label: str, *, ready_s: float = 5) -> Any:
    """A whole node (engine + API, role all, time scale 1) on the engine core; yields
    (its child, its base URL)."""
    port = layout.free_port(layout.API_HOST)
    base = f"http://{layout.API_HOST}:{port}"
    settings = b.settings(time_scale=1.0, host=layout.API_HOST, port=port, base_url=base,
                          rate_limit_per_second=0,
                          plans={"default": {"monitor_limit": 10_000_000}})
    child = await b.procs.spawn("node", "node", {"dsn": b.db.dsn, "settings": settings},
                                b.engine_cpus)
    try:
        await b.wait(child, "ready", label, ready_s, slack=600)
        yield child, base
    finally:
        await b.procs.stop(child)


async def _count_pings(b: Bench) -> int:
    return int(await b.store.pool.fetchval("SELECT count(*) FROM heartbeat_pings"))


async def scenario_pings(b: Bench) -> dict[str, Any]:
    await ensure_installed("wrk", wrk_available, ("wrk",))
    opts = b.opts
    m = opts.monitors
    beats = 200 if opts.quick else 2000
    ports = layout.pick_ports()
    await b.start_targets(ports, slow_s=0.0)
    account, _ = await b.store.create_account("bench-pings")
    b.progress.phase(f"seeding {m:,} URL monitors and {beats:,} heartbeats", max(2.0, m / 2000))
    async with b.store.pool.acquire() as conn:
        await seed_monitors(conn, account.id, layout.monitor_urls(m, ports), uptime=True,
                            certificate=False, interval=INTERVAL_S)
        ids = await seed_heartbeats(conn, account.id, beats)
    runs: dict[str, Any] = {}
    checks = [r["id"] for r in await b.store.pool.fetch(
        "SELECT c.id FROM checks c JOIN monitors m ON m.id = c.monitor_id"
        " WHERE m.account_id = $1 AND c.kind = 'uptime'", account.id)]
    async with node(b, "the node: loading its checks") as (child, base):
        b.progress.phase("the node: one interval of URL probes before the pings", INTERVAL_S)
        await asyncio.sleep(INTERVAL_S)
        w0 = time.time()
        for keep_alive in (True, False):
            name = "keep_alive" if keep_alive else "no_keep_alive"
            script = write_ping_script(b.workdir / f"pings-{name}.lua", ids,
                                       keep_alive=keep_alive)
            before = await _count_pings(b)
            cpu0, db0 = process_cpu_s(child.pid), b.db.cpu_seconds()
            b.progress.phase(f"pings: wrk, {CONNECTIONS} connections, {name}", opts.duration)
            tool = await run_wrk(b.procs, base + "/", seconds=opts.duration,
                                 connections=CONNECTIONS, cpus=b.other_cpus, script=script,
                                 latency=True)
            assert tool is not None
            cpu1, db1 = process_cpu_s(child.pid), b.db.cpu_seconds()
            await asyncio.sleep(1.0)  # answers wrk cut off at its end are still committed
            stored = await _count_pings(b) - before
            answered = tool.operations - tool.errors
            runs[name] = {
                "pings_per_s": round(answered / tool.seconds, 1) if tool.seconds else None,
                "latency_ms": tool.latency_ms, "answered_200": answered,
                "errors": tool.errors, "stored": stored,
                "missing": max(0, answered - stored),
                # The node's CPU over the run (its URL probes included) per ping answered,
                # and the pings one core would answer at that cost: figures that hold on a
                # machine whose other work takes a share of the node's core.
                "node_cpu_share": round((cpu1 - cpu0) / tool.seconds, 3)
                if tool.seconds else None,
                "node_cpu_ms_per_ping": round((cpu1 - cpu0) * 1000 / answered, 3)
                if answered else None,
                "pings_per_node_cpu_s": round(answered / (cpu1 - cpu0), 1)
                if cpu1 > cpu0 else None,
                "db_cpu_ms_per_ping": round((db1 - db0) * 1000 / answered, 3)
                if answered and db0 is not None and db1 is not None else None,
            }
        w1 = time.time()
    lateness = await row_lateness(b, w0, w1, float(INTERVAL_S))
    # Below capacity: every check at its own interval (demand / capacity taken as 1).
    lateness["healthy"].update(
        await probe_gaps(b.store.pool, checks, w0, w1, float(INTERVAL_S), 1.0))
    rec: dict[str, Any] = {
        "scenario": "pings", "monitors": m, "heartbeats": beats,
        "duration_s": opts.duration, "connections": CONNECTIONS, "runs": runs,
        "url_probes": lateness["healthy"],
    }
    rec["targets"] = targets(rec)
    return rec


def targets(rec: dict[str, Any]) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    for name, r in rec["runs"].items():
        p99 = (r["latency_ms"] or {}).get("p99")
        out[f"{name}_pings_per_s"] = (r["pings_per_s"] or 0) >= TARGET_PINGS_PER_S
        out[f"{name}_p99"] = None if p99 is None else p99 < TARGET_P99_MS
        out[f"{name}_none_missing"] = r["missing"] == 0 and r["errors"] == 0
    within = rec["url_probes"].get("probed_within_2x_interval")
    out["url_probes_on_time"] = None if within is None else within >= 0.99
    return out


def table(rec: dict[str, Any]) -> str:
    lines = [f"pings: one node (engine and API on one core) probing {rec['monitors']:,} URL "
             f"monitors; {rec['heartbeats']:,} heartbeats pinged by wrk, "
             f"{rec['connections']} connections, {rec['duration_s']:g} s a run"]
    for name, r in rec["runs"].items():
        lat = r["latency_ms"] or {}
        lines.append(f"  {name:<14} {r['pings_per_s']}/s answered; p50 {lat.get('p50')} ms "
                     f"p99 {lat.get('p99')} ms; {r['answered_200']:,} answered, "
                     f"{r['stored']:,} stored, {r['missing']} missing, {r['errors']} errors; "
                     f"node CPU {r['node_cpu_share']} of a core, {r['node_cpu_ms_per_ping']}"
                     f" ms a ping ({r['pings_per_node_cpu_s']}/CPU-s), database "
                     f"{r['db_cpu_ms_per_ping']} ms a ping")
    u = rec["url_probes"]
    gaps = u.get("gap_intervals") or {}
    lines.append(f"  URL probes     {u['rows']:,} rows; gaps between a check's probes p50 "
                 f"{gaps.get('p50')} p99 {gaps.get('p99')} max {gaps.get('max')} intervals; "
                 f"start lateness against the phase {u['lateness_ms']}; probed within 2x "
                 f"interval {u['probed_within_2x_interval']}, never {u['never_probed']}; "
                 f"error rate {u['error_rate']}")
    lines.append("  targets        " + ", ".join(
        f"{k} {'met' if v else ('n/a' if v is None else 'MISSED')}"
        for k, v in rec["targets"].items()))
    return "\n".join(lines)
