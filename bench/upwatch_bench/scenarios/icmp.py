"""``upwatch bench icmp``: CPU per icmp:// probe, Upwatch's prober side by side with icmplib
and with Prometheus blackbox_exporter's ``icmp`` prober, on the same loopback targets in one
run.

1. **upwatch**: a child (role ``icmpprobe``) runs :class:`engine.probes.icmp.IcmpProber` on
   uvloop: ``--monitors`` probes (default 10,000) of one echo request each, 64 at a time,
   over four loopback addresses; then the same probes with three requests each (the
   monitors' default), for the cost per request.
2. **icmplib** (when installed: ``pip install icmplib``): the same child with
   ``icmplib.async_ping`` (privileged, a raw socket per probe), one request per probe.
3. **blackbox_exporter**: the Debian ``prometheus-blackbox-exporter`` with one module
   (``prober: icmp``, IPv4), asked for the same number of probes through its ``/probe``
   endpoint over keep-alive connections, 64 at a time; every answer must say
   ``probe_success 1``. It sends one echo request per probe.

4. **the engine at load**: 1,000 icmp:// monitors at 30 s (``--quick``: 100), three requests
   each, in the engine as it runs in production (``--duration`` seconds after the warm-up):
   probes held, scheduler lateness, resident memory per monitor.

Runs 1-3 are each pinned to the engine's core after a warm-up of 500 probes. The figure is each
process's CPU time (user + system, from ``/proc/PID/stat``) over its probes, per probe; the
target is upwatch (one request per probe, as blackbox_exporter sends) at most 0.5x
blackbox_exporter. blackbox_exporter's figure includes its HTTP handling of each ``/probe``
request: that is how Prometheus drives it, one scrape per probe.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from upwatch_bench import layout
from upwatch_bench.harness import Bench, engine_figures, load_window, run_engine, seed_uptime
from upwatch_bench.sidebyside import blackbox_side, child_side
from upwatch_bench.stats import per

CONCURRENCY = 64
WARMUP = 500
TARGET_RATIO = 0.5
TIMEOUT_S = 2.0
_CONFIG = ("modules:\n  icmp_v4:\n    prober: icmp\n    timeout: 2s\n    icmp:\n"
           "      preferred_ip_protocol: ip4\n      ip_protocol_fallback: false\n")
TARGETS = ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")
LOAD_MONITORS = 1000
LOAD_LATENESS_P99_MS = 100.0


async def _child(b: Bench, impl: str, n: int, count: int) -> dict[str, Any]:
    return await child_side(
        b, f"icmp-{impl}", "icmpprobe",
        {"impl": impl, "targets": list(TARGETS), "count": count, "interval": 0.0,
         "timeout": TIMEOUT_S, "concurrency": CONCURRENCY},
        n, warmup=WARMUP, warm_s=120, run_s=900, requests=count)


async def _blackbox(b: Bench, n: int) -> dict[str, Any]:
    return await blackbox_side(b, "icmp", _CONFIG, "icmp_v4", list(TARGETS), n,
                               warmup=WARMUP, concurrency=CONCURRENCY, requests=1)


async def _load(b: Bench) -> dict[str, Any]:
    """The engine with ``LOAD_MONITORS`` icmp:// monitors at 30 s (uptime checks only)."""
    n = 100 if b.opts.quick else LOAD_MONITORS
    hosts = layout.HEALTHY_HOSTS
    await seed_uptime(b, "bench-icmp", [f"icmp://{hosts[i % len(hosts)]}" for i in range(n)])
    window = load_window(b, "engine, icmp monitors")
    res = await run_engine(b, window)
    fig = engine_figures(res, "uptime")
    lateness = fig["lateness_ms"] or {}
    async with b.store.pool.acquire() as conn:
        errors = {r["error"]: r["n"] for r in await conn.fetch(
            "SELECT error, count(*) AS n FROM probe_results WHERE error IS NOT NULL"
            " GROUP BY error ORDER BY n DESC LIMIT 3")}
    return {"monitors": n, "errors": errors, "interval_s": window.interval, "probes": fig["probes"],
            "held": per(fig["probes"], n * res["seconds"] / window.interval, 4),
            "error_rate": fig["error_rate"], "lateness_ms": lateness,
            "cpu_s_per_probe": fig["cpu_s_per_probe"],
            "rss_per_monitor_bytes": fig["rss_per_monitor_bytes"],
            "target_met": (lateness.get("p99") is not None
                           and lateness["p99"] < LOAD_LATENESS_P99_MS)}


async def scenario_icmp(b: Bench) -> dict[str, Any]:
    n = b.opts.monitors
    b.progress.phase(f"upwatch: {n:,} ping probes of 1 request", 20)
    ours = await _child(b, "upwatch", n, 1)
    b.progress.phase(f"upwatch: {n:,} ping probes of 3 requests", 20)
    ours3 = await _child(b, "upwatch", n, 3)
    if importlib.util.find_spec("icmplib") is not None:
        b.progress.phase(f"icmplib: {n:,} ping probes of 1 request", 20)
        lib = await _child(b, "icmplib", n, 1)
    else:
        lib = {"missing": "icmplib is not installed (pip install icmplib)"}
    b.progress.phase(f"blackbox_exporter: {n:,} ping probes", 20)
    theirs = await _blackbox(b, n)
    b.progress.phase("the engine with icmp:// monitors at 30 s", b.opts.warmup
                     + b.opts.duration + 10)
    load = await _load(b)
    ratio = (round(ours["cpu_s"] / theirs["cpu_s"], 3) if theirs.get("cpu_s") else None)
    return {"scenario": "icmp", "monitors": n, "concurrency": CONCURRENCY, "load": load,
            "upwatch": ours, "upwatch_3": ours3, "icmplib": lib, "blackbox_exporter": theirs,
            "cpu_ratio": ratio, "target_ratio": TARGET_RATIO,
            "target_met": ratio is not None and ratio <= TARGET_RATIO}


def table(rec: dict[str, Any]) -> str:
    cols = (("upwatch", "upwatch"), ("upwatch x3", "upwatch_3"), ("icmplib", "icmplib"),
            ("blackbox_exporter", "blackbox_exporter"))
    lines = [f"== upwatch bench icmp: {rec['monitors']:,} probes each, "
             f"{rec['concurrency']} at a time, loopback targets =="]
    for name, key in cols:
        if "missing" in rec[key]:
            lines.append(f"  {name}: {rec[key]['missing']}")
    lines.append(f"  {'':<22}" + "".join(f"{name:>19}" for name, _ in cols))
    for label, field in (("requests per probe", "requests_per_probe"),
                         ("CPU us per probe", "cpu_us_per_probe"),
                         ("CPU us per request", "cpu_us_per_request"),
                         ("CPU seconds", "cpu_s"), ("wall seconds", "wall_s")):
        lines.append(f"  {label:<22}" + "".join(
            f"{rec[key].get(field, '-')!s:>19}" for _, key in cols))
    lines.append(f"  {'failed probes':<22}" + "".join(
        f"{sum((rec[key].get('errors') or {}).values()):>19}" for _, key in cols))
    met = "met" if rec["target_met"] else "MISSED"
    lines.append(f"  CPU ratio upwatch / blackbox_exporter: {rec['cpu_ratio']} "
                 f"(target <= {rec['target_ratio']}: {met})")
    load = rec.get("load")
    if load:
        lat = load.get("lateness_ms") or {}
        lines.append(f"  engine, {load['monitors']:,} icmp:// monitors at {load['interval_s']:g} s:"
                     f" held {load['held']}, errors {load['error_rate']}, lateness p50/p99/max "
                     f"{lat.get('p50')}/{lat.get('p99')}/{lat.get('max')} ms, "
                     f"{load['rss_per_monitor_bytes']} B per monitor "
                     f"(p99 < {LOAD_LATENESS_P99_MS:g} ms: "
                     f"{'met' if load['target_met'] else 'MISSED'})")
    return "\n".join(lines)
