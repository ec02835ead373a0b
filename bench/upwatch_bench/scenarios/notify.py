"""``upwatch bench notify``: an alert storm. N monitors go down together (their target
stops: every connection refused) while the webhook is on, twice side by side in one run:

1. **webhook only** (no notification channels), then
2. **webhook + 3 channels** (json:// channels to a loopback receiver).

Each run starts a fresh engine child that also runs the webhook deliverer and the
notification runner, as ``upwatch run`` does in one process. Figures per run, from the
database (times are the database's ``delivered_at`` minus the moment the target stopped):

- seconds until every check is down, until every webhook is delivered, and (run 2) until
  every channel has its digest, with the messages per channel and the events they account
  for;
- the engine's start lateness (p50 / p99 / max) of the probes made from the stop until
  everything is delivered, from the result rows (as the mixed scenario measures it).

The monitors' 30 s interval and the 30 s alert-storm window are scaled by
``time_scale`` (0.1: 3 s); the run's monitors are ``--monitors`` (default 1,000).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

from upwatch_bench import layout
from upwatch_bench.database import seed_monitors
from upwatch_bench.harness import Bench, row_lateness

CHANNELS = 3
TIME_SCALE = 0.1
INTERVAL_S = 30
SETTLE_LIMIT_S = 90.0


async def _poll(fn: Any, limit: float, tick: Any) -> float | None:
    """Seconds until ``fn()`` is true (polled every 50 ms), None past ``limit``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if await fn():
            return time.monotonic() - t0
        await asyncio.sleep(0.05)
        tick()
    return None


async def _one_run(b: Bench, label: str, channels: int, n: int) -> dict[str, Any]:
    pool = b.store.pool
    port = layout.free_port(layout.HEALTHY_HOSTS[0])
    receiver_port = layout.free_port(layout.RECEIVER_HOST)
    b.progress.phase(f"{label}: starting targets", 2)
    target = await b.procs.spawn(
        f"target-{label}", "targets",
        {"binds": [(h, port, "ok") for h in layout.HEALTHY_HOSTS]}, b.other_cpus)
    receiver = await b.procs.spawn(
        f"receiver-{label}", "targets",
        {"binds": [(layout.RECEIVER_HOST, receiver_port, "hook")],
         "record": str(b.workdir / f"receiver-{label}.json")}, b.other_cpus)
    await target.expect("ready", 30)
    await receiver.expect("ready", 30)
    hook = f"http://{layout.RECEIVER_HOST}:{receiver_port}/hook"
    account, _ = await b.store.create_account(f"storm-{label}", webhook_url=hook)
    # Only this run's monitors are enabled: the previous run's are switched off.
    await pool.execute("UPDATE checks SET is_enabled = false")
    b.progress.phase(f"{label}: seeding {n:,} monitors", 2)
    async with pool.acquire() as conn:
        urls = [f"http://{layout.HEALTHY_HOSTS[i % len(layout.HEALTHY_HOSTS)]}:{port}/m/{i}"
                for i in range(n)]
        await seed_monitors(conn, account.id, urls, uptime=True, certificate=False,
                            interval=INTERVAL_S)
    for c in range(channels):
        await b.store.create_channel(
            account.id, name=f"channel {c}",
            url=f"json://{layout.RECEIVER_HOST}:{receiver_port}/channel-{c}",
            events=["downtime", "uptime_restored"], monitor_ids=None, is_enabled=True)
    settings = b.settings(time_scale=TIME_SCALE, probe_timeout=2.0, notify_timeout=10.0)
    engine = await b.procs.spawn(
        f"engine-{label}", "engine",
        {"dsn": b.db.dsn, "settings": settings, "warmup_s": 0.0, "duration_s": 600.0,
         "load_timeout_s": 120, "outbox": True}, b.engine_cpus)
    try:
        await b.wait(engine, "loaded", f"{label}: loading", 5, 120)
        interval = INTERVAL_S * TIME_SCALE
        await asyncio.sleep(2 * interval)  # every check probed ok at least once
        b.progress.phase(f"{label}: {n:,} monitors go down", 20)
        await b.procs.stop(target)
        stop_wall = time.time()

        async def count(sql: str) -> int:
            return int(await pool.fetchval(sql, account.id))

        async def all_down() -> bool:
            return await count("SELECT count(*) FROM checks c JOIN monitors m ON m.id = "
                               "c.monitor_id WHERE m.account_id = $1 AND c.kind = 'uptime' "
                               "AND c.status = 'down'") >= n

        async def settled() -> bool:
            hooks = await count("SELECT count(*) FROM webhook_events WHERE account_id = $1 "
                                "AND status = 'delivered'")
            pending = await count("SELECT count(*) FROM notification_events "
                                  "WHERE account_id = $1 AND status <> 'delivered'")
            queued = await count("SELECT count(*) FROM notification_events "
                                 "WHERE account_id = $1")
            return hooks >= n and pending == 0 and queued >= n * channels

        down_s = await _poll(all_down, SETTLE_LIMIT_S, b.progress.tick)
        b.progress.phase(f"{label}: waiting for every delivery", 20)
        await _poll(settled, SETTLE_LIMIT_S, b.progress.tick)
        end_wall = time.time()
    finally:
        await b.procs.stop(engine)
        await b.procs.stop(receiver)
    t0 = datetime.fromtimestamp(stop_wall, UTC)
    hooks_s = await pool.fetchval(
        "SELECT extract(epoch FROM max(delivered_at) - $2::timestamptz)::float8 "
        "FROM webhook_events WHERE account_id = $1", account.id, t0)
    hooks_done = await pool.fetchval(
        "SELECT count(*) FROM webhook_events WHERE account_id = $1 AND status = 'delivered'",
        account.id)
    per_channel = []
    for row in await pool.fetch(
        """SELECT channel_id,
                  count(*) FILTER (WHERE status = 'delivered') AS events,
                  count(DISTINCT coalesce(group_until::text, id::text))
                      FILTER (WHERE status = 'delivered') AS messages,
                  count(*) FILTER (WHERE group_until IS NOT NULL) AS in_digests,
                  extract(epoch FROM max(delivered_at) FILTER (WHERE group_until IS NOT NULL)
                          - $2::timestamptz)::float8 AS digest_s
           FROM notification_events WHERE account_id = $1
           GROUP BY channel_id ORDER BY channel_id""", account.id, t0):
        per_channel.append({k: row[k] for k in ("events", "messages", "in_digests")}
                           | {"digest_s": _round(row["digest_s"])})
    lateness = await row_lateness(b, stop_wall, end_wall, INTERVAL_S * TIME_SCALE)
    digest_times = [c["digest_s"] for c in per_channel if c["digest_s"] is not None]
    return {
        "label": label,
        "channels": channels,
        "down_s": _round(down_s),
        "webhooks_delivered": int(hooks_done or 0),
        "webhooks_s": _round(hooks_s),
        "every_channel_digest_s": (max(digest_times) if len(digest_times) == channels
                                   else None) if channels else None,
        "per_channel": per_channel,
        "lateness_ms": lateness["healthy"]["lateness_ms"],
        "probe_rows": lateness["healthy"]["rows"],
        "window_s": round(end_wall - stop_wall, 3),
    }


def _round(v: Any) -> float | None:
    return round(float(v), 3) if v is not None else None


async def scenario_notify(b: Bench) -> dict[str, Any]:
    n = b.opts.monitors
    await b.store.ensure_result_partitions(date.today() - timedelta(days=1), 3)
    without = await _one_run(b, "webhook only", 0, n)
    with_channels = await _one_run(b, "webhook + 3 channels", CHANNELS, n)
    p99a = (without["lateness_ms"] or {}).get("p99")
    p99b = (with_channels["lateness_ms"] or {}).get("p99")
    return {
        "scenario": "notify", "monitors": n, "duration_s": with_channels["window_s"],
        "interval_s": INTERVAL_S * TIME_SCALE,
        "group_seconds": 30 * TIME_SCALE, "group_max": 5,
        "runs": [without, with_channels],
        "p99_lateness_ratio": round(p99b / p99a, 3) if p99a and p99b else None,
        "lateness_ms": with_channels["lateness_ms"],
    }
