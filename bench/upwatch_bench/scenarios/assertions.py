"""``upwatch bench http --assertions SHARE``: what requests and assertions cost.

Three measurements, each side by side in one run:

1. Plain monitors' CPU per probe at capacity (twice; ``--quick``: once), the reference.
2. ``SHARE`` of the monitors (every 1/SHARE-th) asserting on a 100 KiB JSON answer
   (``json $.status equals "UP"`` and ``body contains "UP"``), the rest plain, at capacity:
   the extra CPU per asserting probe is ``(cpu per probe - plain cpu per probe) / SHARE``.
3. 1,000 monitors (``--quick``: 100) whose target sends a 1 MiB body built to be hard for
   backtracking regexes, asserted with ``body matches "(a+)+$"``, beside 5,000 plain ones
   (``--quick``: 500), at the scheduled load: the plain monitors' start lateness.
"""

from __future__ import annotations

import statistics
from datetime import date, timedelta
from typing import Any

import orjson

from upwatch_bench import layout
from upwatch_bench.harness import (
    Bench,
    capacity_window,
    engine_figures,
    load_window,
    row_lateness,
    run_engine,
)
from upwatch_bench.stats import per, ratio

JSON_ASSERTIONS: list[dict[str, Any]] = [
    {"source": "json", "property": "$.status", "comparison": "equals", "target": "UP"},
    {"source": "body", "property": None, "comparison": "contains", "target": '"UP"'},
]
BOMB_ASSERTIONS: list[dict[str, Any]] = [
    {"source": "body", "property": None, "comparison": "matches", "target": "(a+)+$"},
]


async def _targets(b: Any, plain_port: int, json_port: int, bomb_port: int) -> None:
    binds: list[tuple[str, int, str]] = []
    for host in layout.HEALTHY_HOSTS:
        binds += [(host, plain_port, "ok"), (host, json_port, "json100k")]
    for host in layout.HOSTILE_HOSTS:
        binds.append((host, bomb_port, "bomb1m"))
    cfg = {"binds": binds, "slow_s": 4.0, "hang_cap_s": 120.0}
    count = max(2, len(b.other_cpus))
    children = [await b.procs.spawn(f"targets{i}", "targets", cfg, b.other_cpus)
                for i in range(count)]
    for c in children:
        await c.expect("ready", 30)


async def _seed(b: Any, account_id: int, urls: list[str],
                assertions: dict[int, list[dict[str, Any]]]) -> None:
    from upwatch_bench.database import seed_monitors

    async with b.store.pool.acquire() as conn:
        await conn.execute("DELETE FROM monitors WHERE account_id = $1", account_id)
        await seed_monitors(conn, account_id, urls, uptime=True, certificate=False,
                            interval=30)
        ids = [r["id"] for r in await conn.fetch(
            "SELECT id FROM monitors WHERE account_id = $1 ORDER BY id", account_id)]
        chosen = sorted(assertions)
        await conn.execute(
            """UPDATE monitors m SET assertions = u.a::jsonb
               FROM unnest($1::bigint[], $2::text[]) AS u(id, a) WHERE m.id = u.id""",
            [ids[i] for i in chosen], [orjson.dumps(assertions[i]).decode() for i in chosen])


async def scenario_assertions(b: Bench, share: float) -> dict[str, Any]:
    opts = b.opts
    n = opts.monitors
    plain_port, json_port, bomb_port = (layout.free_port() for _ in range(3))
    b.progress.phase("starting targets", 3)
    await _targets(b, plain_port, json_port, bomb_port)
    account, _ = await b.store.create_account("bench")
    await b.store.ensure_result_partitions(date.today() - timedelta(days=1), 3)
    hosts = layout.HEALTHY_HOSTS
    plain = [f"http://{hosts[i % len(hosts)]}:{plain_port}/m/{i}" for i in range(n)]
    rec: dict[str, Any] = {"scenario": "http", "assertions_share": share, "monitors": n}

    # 1. Plain monitors.
    b.progress.phase(f"seeding {n:,} plain monitors", max(1.0, n / 20_000))
    await _seed(b, account.id, plain, {})
    demand = 30_000.0
    ours: list[float] = []
    for i in range(1 if opts.quick else 2):
        w = capacity_window(b, f"plain ({i + 1})", demand)
        ours.append(engine_figures(await run_engine(b, w), "uptime")["cpu_s_per_probe"])
    plain_cpu = statistics.median(ours)
    rec["plain_cpu_s_per_probe"] = plain_cpu
    rec["plain_cpu_s_per_probe_runs"] = ours

    # 2. A share of the monitors asserting on a 100 KiB JSON answer.
    step = max(1, round(1 / share))
    urls = [f"http://{hosts[i % len(hosts)]}:{json_port}/j/{i}" if i % step == 0 else u
            for i, u in enumerate(plain)]
    asserting = {i: JSON_ASSERTIONS for i in range(0, n, step)}
    b.progress.phase(f"seeding {len(asserting):,} asserting monitors", max(1.0, n / 20_000))
    await _seed(b, account.id, urls, asserting)
    w = capacity_window(b, "with assertions", demand)
    fig = engine_figures(await run_engine(b, w), "uptime")
    real_share = len(asserting) / n
    rec["mixed_cpu_s_per_probe"] = fig["cpu_s_per_probe"]
    rec["mixed_error_rate"] = fig["error_rate"]
    if fig["cpu_s_per_probe"] is not None and plain_cpu is not None:
        extra = (fig["cpu_s_per_probe"] - plain_cpu) / real_share
        rec["assertion_extra_cpu_s_per_probe"] = round(extra, 9)
        rec["assertion_probe_vs_plain"] = ratio(plain_cpu + extra, plain_cpu)

    # 3. Regex-hostile 1 MiB bodies beside plain monitors, at the scheduled load.
    bombs, others = (100, 500) if opts.quick else (1000, 5000)
    bad = layout.HOSTILE_HOSTS
    urls = [f"http://{bad[i % len(bad)]}:{bomb_port}/b/{i}" if i < bombs
            else plain[i % n] + f"x{i}" for i in range(bombs + others)]
    b.progress.phase(f"seeding {bombs:,} + {others:,} monitors", 2)
    await _seed(b, account.id, urls, {i: BOMB_ASSERTIONS for i in range(bombs)})
    saved = opts.monitors
    opts.monitors = bombs + others
    try:
        w = load_window(b, "regex stress")
        res = await run_engine(b, w)
    finally:
        opts.monitors = saved
    groups = await row_lateness(b, res["wall_start"], res["wall_end"], w.interval)
    rec["regex_stress"] = {
        "bomb_monitors": bombs, "plain_monitors": others, "interval_s": w.interval,
        "plain_lateness_ms": groups["healthy"]["lateness_ms"],
        "plain_rows": groups["healthy"]["rows"],
        "plain_error_rate": groups["healthy"]["error_rate"],
        "bomb_rows": groups["hostile"]["rows"],
        "bomb_error_rate": groups["hostile"]["error_rate"],
        "engine_cpu_utilization": per(res["cpu_s"], res["seconds"], 3),
    }
    return rec


def table(rec: dict[str, Any]) -> str:
    """A readable block for the record of :func:`scenario_assertions`."""
    def us(v: Any) -> str:
        return "-" if v is None else f"{v * 1e6:.1f} us"

    lines = [f"== upwatch bench http --assertions {rec['assertions_share']:g}: "
             f"{rec['monitors']:,} monitors =="]
    lines.append(f"  plain CPU per probe                   {us(rec.get('plain_cpu_s_per_probe'))}"
                 f"  runs {[us(v) for v in rec.get('plain_cpu_s_per_probe_runs') or []]}")
    lines.append(f"  CPU per probe with assertions mixed   {us(rec.get('mixed_cpu_s_per_probe'))}"
                 f"  (error rate {rec.get('mixed_error_rate')})")
    lines.append("  extra CPU per asserting probe         "
                 f"{us(rec.get('assertion_extra_cpu_s_per_probe'))}"
                 f"  (x{rec.get('assertion_probe_vs_plain')} a plain probe; 100 KiB JSON,"
                 " a json and a body assertion)")
    rs = rec.get("regex_stress") or {}
    lat = rs.get("plain_lateness_ms") or {}
    lines.append(f"  regex stress: {rs.get('bomb_monitors')} x 1 MiB '(a+)+$' beside "
                 f"{rs.get('plain_monitors')} plain, interval {rs.get('interval_s')} s:")
    lines.append(f"    plain lateness p50 / p99 / max      {lat.get('p50')} / {lat.get('p99')}"
                 f" / {lat.get('max')} ms  ({rs.get('plain_rows')} probes, error rate "
                 f"{rs.get('plain_error_rate')}); bomb probes {rs.get('bomb_rows')}; engine "
                 f"CPU {rs.get('engine_cpu_utilization')} cores")
    for note in rec.get("notes") or []:
        lines.append(f"  note: {note}")
    return "\n".join(lines)
