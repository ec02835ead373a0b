"""``upwatch bench webhooks``: events queued at 1,000/s over N monitors (1,000) and delivered
by the real Deliverer to a local receiver; then a backlog drained as fast as it goes."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import orjson

from upwatch_bench import layout, report
from upwatch_bench.harness import Bench, Window, cprofile_path, finish_profile, profile_window
from upwatch_bench.stats import per, ratio, summary_ms


async def scenario_webhooks(b: Bench) -> dict[str, Any]:
    opts = b.opts
    m = opts.monitors
    rate = 200.0 if opts.quick else 1000.0
    backlog = 1000 if opts.quick else 5000
    port = layout.free_port(layout.RECEIVER_HOST)
    record_path = b.workdir / "receiver.json"
    b.progress.phase("starting the receiver", 2)
    receiver = await b.procs.spawn(
        "receiver", "targets",
        {"binds": [(layout.RECEIVER_HOST, port, "hook")], "record": str(record_path)},
        b.other_cpus)
    await receiver.expect("ready", 30)
    account, _ = await b.store.create_account(
        "bench-hooks", webhook_url=f"http://{layout.RECEIVER_HOST}:{port}/hook")
    window = Window("window", opts.warmup, opts.duration, 1.0)
    deliverer = await b.procs.spawn(
        "deliverer", "deliverer",
        {"dsn": b.db.dsn, "settings": b.settings(time_scale=1.0),
         "cprofile": cprofile_path(b, window)}, b.engine_cpus)
    await deliverer.expect("ready", 60)

    start_wall = time.time() + 1.0
    w0 = start_wall + opts.warmup
    w1 = w0 + opts.duration
    producer = await b.procs.spawn(
        "producer", "producer",
        {"dsn": b.db.dsn, "account_id": account.id, "monitors": m, "rate": rate,
         "start_wall": start_wall, "end_wall": w1}, b.other_cpus)
    # py-spy over the window (--profile); cProfile (--cprofile) runs between the marks.
    profiling = profile_window(b, deliverer, Window(
        window.name, start_wall - time.time() + opts.warmup, opts.duration, 1.0))

    async def mark_at(wall: float, tag: str) -> dict[str, Any]:
        while (left := wall - time.time()) > 0:
            await asyncio.sleep(min(0.25, left))
            b.progress.tick()
        deliverer.send(cmd="mark", tag=tag)
        return await deliverer.expect("mark", 30)

    b.progress.phase(f"webhooks: {rate:.0f} events/s offered", w1 - time.time())
    m0 = await mark_at(w0, "start")
    m1 = await mark_at(w1, "end")
    produced = await producer.expect("result", 60)
    await b.procs.stop(producer)
    await finish_profile(profiling)

    async def pending() -> int:
        return int(await b.store.pool.fetchval(
            "SELECT count(*) FROM webhook_events WHERE status = 'pending'"))

    # Let what was queued in the window arrive (bounded), so late deliveries count as late.
    for _ in range(100):  # 10 s at most
        if not await pending():
            break
        await asyncio.sleep(0.1)

    # Capacity: a backlog queued at once, drained as fast as the deliverer goes.
    b.progress.phase(f"webhooks: draining a backlog of {backlog:,}", backlog / 1000)
    body = b'{"check":{"name":"uptime","status":"nok"},"monitor":{"id":1}}'
    mb0 = await mark_at(time.time(), "backlog-start")
    async with b.store.pool.acquire() as conn, conn.transaction():
        ids = await conn.fetch(
            """INSERT INTO webhook_events (account_id, monitor_id, check_id, event, body)
               SELECT $1, g % $2 + 1, NULL, 'downtime', $3::bytea
               FROM generate_series(0, $4 - 1) AS g RETURNING id""",
            account.id, m, body, backlog)
        await conn.execute("SELECT pg_notify('upwatch_webhooks', '')")
    backlog_wall = time.time()
    backlog_ids = {r["id"] for r in ids}
    for _ in range(2400):  # 120 s at most
        if not await pending():
            break
        await asyncio.sleep(0.05)
        b.progress.tick()
    mb1 = await mark_at(time.time(), "backlog-end")

    receiver.send(cmd="dump")
    await receiver.expect("dumped", 30)
    received = orjson.loads(record_path.read_bytes())
    first_200: dict[int, float] = {}
    for event_id, at in zip(received["ids"], received["times"], strict=True):
        first_200.setdefault(event_id, at)

    rows = await b.store.pool.fetch(
        "SELECT id, extract(epoch FROM created_at)::float8 AS created FROM webhook_events"
        " WHERE created_at >= $1 AND created_at < $2",
        datetime.fromtimestamp(w0, UTC), datetime.fromtimestamp(w1, UTC))
    e2e = [first_200[r["id"]] - r["created"] for r in rows if r["id"] in first_200]
    undelivered = sum(1 for r in rows if r["id"] not in first_200)
    e2e_ms = summary_ms(e2e)
    delivered_in_window = sum(1 for t in first_200.values() if w0 <= t < w1)
    drained = [first_200[i] for i in backlog_ids if i in first_200]
    drain_s = (max(drained) - backlog_wall) if drained else None
    cpu = m1["cpu_s"] - m0["cpu_s"]
    delivered = m1["delivered"] - m0["delivered"]
    seconds = m1["wall"] - m0["wall"]
    rec: dict[str, Any] = {
        "scenario": "webhooks", "monitors": m, "duration_s": opts.duration,
        "offered_per_s": rate,
        "queued_per_s": per(len(rows), opts.duration, 1),
        "delivered_per_s": per(delivered_in_window, opts.duration, 1),
        "held": ratio(delivered_in_window, len(rows)),
        "e2e_p50_ms": e2e_ms["p50"],
        "e2e_p99_ms": e2e_ms["p99"] if not undelivered else None,
        "e2e_ms": e2e_ms,
        "undelivered": undelivered,
        "cpu_s_per_delivery": per(cpu, delivered),
        "cpu_utilization": per(cpu, seconds, 3),
        "max_delivered_per_s": per(len(drained), drain_s, 1),
        "backlog": {"events": backlog, "delivered": len(drained),
                    "seconds": round(drain_s, 3) if drain_s else None,
                    "cpu_s_per_delivery": per(mb1["cpu_s"] - mb0["cpu_s"],
                                              mb1["delivered"] - mb0["delivered"])},
        "producer": produced,
        "probes_per_s": None, "cpu_s_per_probe": None, "lateness_ms": None,
        "rss_per_monitor_bytes": None, "error_rate": per(m1["tries"] - m0["tries"] - delivered,
                                                         m1["tries"] - m0["tries"], 6),
        "baseline_probes_per_s": None, "baseline_cpu_s_per_probe": None,
        "limit_per_s": None, "ratio_vs_limit": None, "ratio_vs_baseline": None,
    }
    if undelivered:
        b.notes.append(f"{undelivered} events queued in the window were not delivered within "
                       "10 s after it; e2e p99 is not reported")
    rec["targets"] = report.webhook_targets(rec)
    return rec
