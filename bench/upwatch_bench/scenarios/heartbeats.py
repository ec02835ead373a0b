"""``upwatch bench heartbeats``: N heartbeat monitors (default 100,000; ``--quick``: 2,000)
held by a whole node (``upwatch run``'s default, one core): resident memory per heartbeat,
and how late a missed deadline alerts when D of them (10,000; at most a tenth of N) fall in
the same minute.

What runs: N heartbeats are seeded up (a success ping a moment ago, a ping a day, an hour's
grace: each in the node's timing wheel at tomorrow's deadline), the account with a webhook
URL on loopback (nothing answers: the alert is the queued ``downtime`` event).

1. The node with every heartbeat disabled, then with all enabled: its resident set once
   ready (checks loaded), the difference over N is the memory per heartbeat.
2. Before the second start, D heartbeats get a period of 60 s, a grace of 60 s and a last
   success such that expected + grace falls, spread evenly, in one minute starting
   ``LEAD_S`` after the node is started. The lateness of each alert is its ``downtime``
   event's creation time minus its expected + grace; p50/p99/max, and how many never
   alerted within ``SETTLE_S`` of the minute's end.

Targets: at most 1 KiB per heartbeat; p99 lateness at most 1 s; none missing.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from upwatch_bench.harness import Bench, BenchError
from upwatch_bench.scenarios.pings import node, seed_heartbeats
from upwatch_bench.stats import summary_ms

DEADLINES = 10_000
LEAD_S = 120.0  # from the node's start to the first deadline (it loads N checks first)
QUICK_LEAD_S = 40.0
SPREAD_S = 60.0
SETTLE_S = 15.0
TARGET_BYTES = 1024
TARGET_P99_MS = 1000.0


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise BenchError(f"no VmRSS for pid {pid}")


async def _settle_rss(pid: int, seconds: float = 5.0) -> int:
    """The node's RSS after ``seconds`` more (its first decisions and GC done)."""
    await asyncio.sleep(seconds)
    return _rss(pid)


async def scenario_heartbeats(b: Bench) -> dict[str, Any]:
    n = b.opts.monitors if b.opts.monitors else 100_000
    d = min(DEADLINES, n // 10)
    lead = QUICK_LEAD_S if b.opts.quick else LEAD_S
    account, _ = await b.store.create_account(
        "bench-heartbeats", webhook_url="http://127.0.0.1:9/hook")
    b.progress.phase(f"seeding {n:,} heartbeats", max(2.0, n / 20_000))
    async with b.store.pool.acquire() as conn:
        await seed_heartbeats(conn, account.id, n)
        await conn.execute(
            """UPDATE heartbeats SET last_ping_at = now(), last_success_at = now()
               WHERE account_id = $1""", account.id)
        await conn.execute(
            """UPDATE checks c SET status = 'ok' FROM monitors m
               WHERE m.id = c.monitor_id AND m.account_id = $1""", account.id)
        checks = [r["check_id"] for r in await conn.fetch(
            "SELECT check_id FROM heartbeats WHERE account_id = $1 ORDER BY check_id",
            account.id)]
        await conn.execute("UPDATE checks SET is_enabled = false WHERE id = ANY($1::bigint[])",
                           checks)
    rec: dict[str, Any] = {"scenario": "heartbeats", "heartbeats": n, "deadlines": d,
                           "spread_s": SPREAD_S}
    async with node(b, "the node without heartbeats") as (child, _):
        rss_without = await _settle_rss(child.pid)
    due = checks[:: max(1, n // d)][:d]
    async with b.store.pool.acquire() as conn:
        await conn.execute("UPDATE checks SET is_enabled = true WHERE id = ANY($1::bigint[])",
                           checks)
        start = datetime.now(UTC)
        deadlines = [start + timedelta(seconds=lead + SPREAD_S * i / d) for i in range(d)]
        await conn.execute(
            """UPDATE heartbeats h SET period_s = 60, grace_s = 60,
                      last_ping_at = u.at - interval '120 seconds',
                      last_success_at = u.at - interval '120 seconds'
               FROM unnest($1::bigint[], $2::timestamptz[]) AS u(check_id, at)
               WHERE h.check_id = u.check_id""", due, deadlines)
    t0 = time.monotonic()
    async with node(b, f"the node loading {n:,} heartbeats", ready_s=10) as (child, _):
        load_s = time.monotonic() - t0
        rss_with = await _settle_rss(child.pid)
        left = (deadlines[-1] - datetime.now(UTC)).total_seconds() + SETTLE_S
        b.progress.phase(f"{d:,} deadlines in one minute", max(1.0, left))
        await asyncio.sleep(max(0.0, left))
        rss_end = _rss(child.pid)
    rows = await b.store.pool.fetch(
        """SELECT check_id, min(created_at) AS at FROM webhook_events
           WHERE account_id = $1 AND event = 'downtime' GROUP BY check_id""", account.id)
    alerted = {r["check_id"]: r["at"] for r in rows}
    late = [(alerted[c] - at).total_seconds() for c, at in zip(due, deadlines, strict=True)
            if c in alerted]
    first_ready = (start + timedelta(seconds=load_s)) <= deadlines[0]
    rec.update({
        "load_s": round(load_s, 1), "ready_before_first_deadline": first_ready,
        "rss_without_bytes": rss_without, "rss_with_bytes": rss_with, "rss_end_bytes": rss_end,
        "rss_per_heartbeat_bytes": round((rss_with - rss_without) / n, 1),
        "rss_end_per_heartbeat_bytes": round((rss_end - rss_without) / n, 1),
        "alert_lateness_ms": summary_ms(late), "alerted": len(late),
        "missing": d - len(late),
        "other_alerts": len(alerted) - len(late),
    })
    p99 = (rec["alert_lateness_ms"] or {}).get("p99")
    rec["targets"] = {
        "rss_per_heartbeat": rec["rss_end_per_heartbeat_bytes"] <= TARGET_BYTES,
        "alert_p99": None if p99 is None else p99 <= TARGET_P99_MS,
        "none_missing": rec["missing"] == 0,
    }
    return rec


def table(rec: dict[str, Any]) -> str:
    lat = rec["alert_lateness_ms"] or {}
    return "\n".join([
        f"heartbeats: {rec['heartbeats']:,} held by one node (engine and API on one core); "
        f"{rec['deadlines']:,} deadlines in {rec['spread_s']:g} s",
        f"  memory      {rec['rss_per_heartbeat_bytes']} B per heartbeat when loaded, "
        f"{rec['rss_end_per_heartbeat_bytes']} B after the deadlines "
        f"(RSS {rec['rss_without_bytes'] / 2**20:.0f} -> {rec['rss_with_bytes'] / 2**20:.0f}"
        f" -> {rec['rss_end_bytes'] / 2**20:.0f} MiB); loaded in {rec['load_s']} s",
        f"  alerts      lateness after expected + grace: p50 {lat.get('p50')} ms, p99 "
        f"{lat.get('p99')} ms, max {lat.get('max')} ms; {rec['alerted']:,} alerted, "
        f"{rec['missing']} missing, {rec['other_alerts']} other",
        "  targets     " + ", ".join(
            f"{k} {'met' if v else ('n/a' if v is None else 'MISSED')}"
            for k, v in rec["targets"].items()),
    ])
