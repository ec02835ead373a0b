"""``upwatch bench network``: the three network monitor kinds at once in one engine.

``--monitors`` tcp:// monitors at 30 s (10,000), as many dns:// monitors at 60 s and a
tenth as many icmp:// monitors at 30 s (three echo requests each), all on loopback
targets, run by the engine child (as ``upwatch bench http`` runs it) for ``--duration``
after the warm-up:

* tcp: the targets children of ``upwatch bench tcp`` (they accept; the probe connects);
* dns: the bench's DNS server (a child on the other cores), ``m<i>.names.test`` A;
* icmp: the loopback addresses of ``upwatch bench icmp`` (the kernel answers).

Figures: per scheme, held (result rows in the window / probes due in it) and start
lateness p50/p99 from the result rows (a row's time less the probe's span: a ping's three
requests go 500 ms apart), target p99 under 100 ms; for the whole engine, the scheduler's
own lateness (its dispatch against the due time), its CPU per probe and the resident
memory per idle monitor (RSS after loading, before the first probe, over the checks
scheduled: target at most 1 KiB), measured as the other scenarios measure it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from engine.domain import ping
from upwatch_bench import layout
from upwatch_bench.database import seed_monitors
from upwatch_bench.harness import Bench, engine_figures, load_window, run_engine, start_lateness
from upwatch_bench.stats import per, summary_ms

LATENESS_P99_MS = 100.0
RSS_PER_MONITOR_BYTES = 1024
PING_SLACK_S = 0.1
# scheme -> (interval in seconds, share of --monitors)
FLEET: dict[str, tuple[int, float]] = {"tcp": (30, 1.0), "dns": (60, 1.0), "icmp": (30, 0.1)}


def fleet_urls(scheme: str, n: int, tcp_port: int, dns_server: str) -> list[str]:
    """The ``n`` URLs of one scheme's monitors, spread over the healthy loopback hosts."""
    hosts = layout.HEALTHY_HOSTS
    if scheme == "tcp":
        return [f"tcp://{hosts[i % len(hosts)]}:{tcp_port}" for i in range(n)]
    if scheme == "dns":
        return [f"dns://{dns_server}/m{i}.{layout.NAMES_ZONE}?type=A" for i in range(n)]
    return [f"icmp://{hosts[i % len(hosts)]}" for i in range(n)]


def probe_span_s(scheme: str, total_ms: float | None) -> float:
    """How long before its result row a probe started. A ping's ``total_ms`` is its round
    trip: its requests go ``interval_ms`` apart (the URL's defaults here), the row is
    written after the last reply."""
    span = (total_ms or 0.0) / 1000.0
    if scheme == "icmp":
        span += (ping.DEFAULT_COUNT - 1) * ping.DEFAULT_INTERVAL_MS / 1000.0
    return span


def row_lateness_s(scheme: str, check_id: int, at: float, total_ms: float | None,
                   interval: float) -> float:
    """A result row's start lateness. A ping's start is estimated (its requests' timers
    fire a few ms either side of 500 ms apart): an estimate up to :data:`PING_SLACK_S`
    before its slot is on time, not an interval late."""
    late = start_lateness(check_id, at - probe_span_s(scheme, total_ms), interval)
    if scheme == "icmp" and late > interval - PING_SLACK_S:
        return 0.0
    return late


async def _by_scheme(b: Bench, wall0: float, wall1: float, time_scale: float,
                     counts: dict[str, int], seconds: float) -> dict[str, dict[str, Any]]:
    """Held, start lateness and error rate per scheme, from the window's result rows."""
    rows = await b.store.pool.fetch(
        """SELECT r.check_id, extract(epoch FROM r.at)::float8 AS at, r.total_ms, r.outcome,
                  m.scheme, c.interval_s
           FROM probe_results r JOIN checks c ON c.id = r.check_id
           JOIN monitors m ON m.id = c.monitor_id
           WHERE r.at >= $1 AND r.at < $2 AND NOT r.confirmation""",
        datetime.fromtimestamp(wall0, UTC), datetime.fromtimestamp(wall1, UTC))
    out: dict[str, dict[str, Any]] = {}
    for scheme, n in counts.items():
        sel = [r for r in rows if r["scheme"] == scheme]
        interval = FLEET[scheme][0] * time_scale
        late = [row_lateness_s(scheme, r["check_id"], r["at"], r["total_ms"],
                               r["interval_s"] * time_scale) for r in sel]
        errors = sum(1 for r in sel if r["outcome"] != 0)
        out[scheme] = {"monitors": n, "interval_s": interval, "rows": len(sel),
                       "held": per(len(sel), n * seconds / interval, 4),
                       "lateness_ms": summary_ms(late), "error_rate": per(errors, len(sel), 6)}
    return out


async def scenario_network(b: Bench) -> dict[str, Any]:
    base = b.opts.monitors
    counts = {s: max(1, int(base * share)) for s, (_, share) in FLEET.items()}
    ports = layout.pick_ports()
    b.progress.phase("starting targets and the DNS server", 5)
    await b.start_targets(ports, slow_s=4.0)
    await b.start_dns(list(layout.HEALTHY_HOSTS[:4]), layout.NAMES_ZONE)
    assert b.dns_address is not None
    await b.store.ensure_result_partitions(date.today() - timedelta(days=1), 3)
    for scheme, n in counts.items():
        b.progress.phase(f"seeding {n:,} {scheme} monitors", max(1.0, n / 20_000))
        account, _ = await b.store.create_account(f"bench network {scheme}")
        async with b.store.pool.acquire() as conn:
            await seed_monitors(conn, account.id,
                                fleet_urls(scheme, n, ports.ok, b.dns_address),
                                uptime=True, certificate=False, interval=FLEET[scheme][0])
    window = load_window(b, "engine, tcp dns icmp monitors")
    res = await run_engine(b, window, dns_warm_s=0.0)
    fig = engine_figures(res, "uptime")
    schemes = await _by_scheme(b, res["wall_start"], res["wall_end"], window.time_scale,
                               counts, res["seconds"])
    rss = fig["rss_per_monitor_bytes"]
    worst_p99 = max([((s["lateness_ms"] or {}).get("p99") or 0.0) for s in schemes.values()]
                    + [(fig["lateness_ms"] or {}).get("p99") or 0.0])
    held = min(s["held"] or 0.0 for s in schemes.values())
    return {"scenario": "network", "monitors": counts, "window_s": round(res["seconds"], 3),
            "schemes": schemes, "probes": fig["probes"],
            "scheduler_lateness_ms": fig["lateness_ms"],
            "cpu_s_per_probe": fig["cpu_s_per_probe"],
            "cpu_utilization": fig["cpu_utilization"],
            "rss_per_monitor_bytes": rss, "scheduled": fig["scheduled"],
            # After the window: every monitor probed, what the probers keep between probes
            # (a dns:// monitor's question and last reply) and the results buffers counted.
            "rss_end_per_monitor_bytes": fig["rss_end_per_monitor_bytes"],
            "load_s": fig["load_s"], "held": held, "lateness_p99_ms": worst_p99,
            "target_met": {"lateness": worst_p99 < LATENESS_P99_MS,
                           "memory": rss is not None and rss <= RSS_PER_MONITOR_BYTES,
                           "held": held >= 0.99}}


def table(rec: dict[str, Any]) -> str:
    """The record as a few lines."""
    total = sum(rec["monitors"].values())
    lines = [f"== upwatch bench network: {total:,} monitors at once in one engine, "
             f"{rec['window_s']:g} s window, loopback targets =="]
    for scheme, s in rec["schemes"].items():
        late = s["lateness_ms"] or {}
        lines.append(f"  {scheme:<5} {s['monitors']:>7,} at {s['interval_s']:g} s: held "
                     f"{s['held']}, lateness p50/p99/max {late.get('p50')}/{late.get('p99')}/"
                     f"{late.get('max')} ms, error rate {s['error_rate']}")
    sched = rec["scheduler_lateness_ms"] or {}
    met = {k: "met" if v else "MISSED" for k, v in rec["target_met"].items()}
    lines.append(f"  scheduler lateness p50/p99 {sched.get('p50')}/{sched.get('p99')} ms; "
                 f"engine CPU per probe {rec['cpu_s_per_probe']} s, "
                 f"{rec['cpu_utilization']} of a core")
    lines.append(f"  resident per idle monitor: {rec['rss_per_monitor_bytes']} B "
                 f"({rec['scheduled']:,} checks; target <= {RSS_PER_MONITOR_BYTES} B: "
                 f"{met['memory']}); after the window, every monitor probed: "
                 f"{rec['rss_end_per_monitor_bytes']} B")
    lines.append(f"  held {rec['held']} ({met['held']}), p99 lateness {rec['lateness_p99_ms']}"
                 f" ms (target < {LATENESS_P99_MS:g} ms: {met['lateness']})")
    return "\n".join(lines)
