"""``upwatch bench tcp``: ``--monitors`` tcp:// monitors (10,000) at 30 s through the
engine, then CPU per tcp:// probe, Upwatch's prober side by side with Prometheus
blackbox_exporter's ``tcp`` prober, on the same loopback targets in one run.

0. **The fleet**: N tcp:// monitors seeded in the database against the bench's targets,
   run by the engine (a child, as ``upwatch bench http`` runs it) for ``--duration``:
   held (probes made / probes due), start lateness p50/p99 from the result rows (target
   p99 under 100 ms), the engine's CPU per probe.
1. A targets child listens on four loopback addresses (it accepts; the probes connect and
   close).
2. **upwatch**: a child (role ``tcpprobe``) runs :class:`engine.probes.tcp.TcpProber` on
   uvloop, ``--monitors`` probes (default 10,000), 64 at a time.
3. **blackbox_exporter**: the Debian ``prometheus-blackbox-exporter`` with one module
   (``prober: tcp``), asked for the same number of probes through its ``/probe`` endpoint
   over keep-alive connections, 64 at a time; every answer must say ``probe_success 1``.

Both run pinned to the engine's core, after a warm-up of 500 probes each. The figure is
each process's CPU time (user + system, from ``/proc/PID/stat``) over its probes, per
probe; the target (``--target`` in the table) is upwatch at most 0.5x blackbox_exporter.
blackbox_exporter's figure includes its HTTP handling of each ``/probe`` request: that is
how Prometheus drives it, one scrape per probe.
"""

from __future__ import annotations

from typing import Any

from upwatch_bench import layout
from upwatch_bench.harness import (
    Bench,
    engine_figures,
    load_window,
    row_lateness,
    run_engine,
    seed_uptime,
)
from upwatch_bench.sidebyside import blackbox_side, child_side
from upwatch_bench.stats import per

CONCURRENCY = 64
WARMUP = 500
TARGET_RATIO = 0.5
_CONFIG = "modules:\n  tcp_connect:\n    prober: tcp\n    timeout: 5s\n"


async def _ours(b: Bench, targets: list[tuple[str, int]], n: int) -> dict[str, Any]:
    return await child_side(b, "tcpprobe", "tcpprobe",
                            {"targets": targets, "concurrency": CONCURRENCY}, n,
                            warmup=WARMUP, warm_s=60, run_s=600)


async def _blackbox(b: Bench, targets: list[tuple[str, int]], n: int) -> dict[str, Any]:
    return await blackbox_side(b, "tcp", _CONFIG, "tcp_connect",
                               [f"{host}:{port}" for host, port in targets], n,
                               warmup=WARMUP, concurrency=CONCURRENCY)


async def _fleet(b: Bench, n: int) -> dict[str, Any]:
    """N tcp:// monitors at 30 s through the engine: held, lateness, CPU per probe."""
    ports = layout.pick_ports()
    b.progress.phase("fleet: starting targets", 3)
    await b.start_targets(ports, slow_s=4.0)
    hosts = layout.HEALTHY_HOSTS
    b.progress.phase(f"fleet: seeding {n:,} tcp monitors", max(1.0, n / 20_000))
    await seed_uptime(b, "bench tcp fleet",
                      [f"tcp://{hosts[i % len(hosts)]}:{ports.ok}" for i in range(n)])
    load = load_window(b, "engine, tcp monitors")
    res = await run_engine(b, load)
    fig = engine_figures(res, "uptime")
    groups = await row_lateness(b, res["wall_start"], res["wall_end"], load.interval)
    healthy = groups["healthy"]
    return {"monitors": n, "interval_s": load.interval, "window_s": round(res["seconds"], 3),
            "held": per(fig["probes"], n * res["seconds"] / load.interval, 4),
            "probes": fig["probes"], "cpu_s_per_probe": fig.get("cpu_s_per_probe"),
            "lateness_ms": healthy["lateness_ms"], "error_rate": healthy["error_rate"]}


async def scenario_tcp(b: Bench) -> dict[str, Any]:
    n = b.opts.monitors
    fleet = await _fleet(b, n)
    hosts = layout.HEALTHY_HOSTS[:4]
    port = layout.free_port(hosts[0])
    b.progress.phase("starting targets", 2)
    target = await b.procs.spawn("targets", "targets",
                                 {"binds": [(h, port, "ok") for h in hosts]}, b.other_cpus)
    try:
        await target.expect("ready", 30)
        targets = [(h, port) for h in hosts]
        b.progress.phase(f"upwatch: {n:,} tcp probes", 20)
        ours = await _ours(b, targets, n)
        b.progress.phase(f"blackbox_exporter: {n:,} tcp probes", 20)
        theirs = await _blackbox(b, targets, n)
    finally:
        await b.procs.stop(target)
    ratio = (round(ours["cpu_s"] / theirs["cpu_s"], 3)
             if theirs.get("cpu_s") else None)
    return {"scenario": "tcp", "monitors": n, "concurrency": CONCURRENCY, "fleet": fleet,
            "upwatch": ours, "blackbox_exporter": theirs, "cpu_ratio": ratio,
            "target_ratio": TARGET_RATIO,
            "target_met": ratio is not None and ratio <= TARGET_RATIO}


def table(rec: dict[str, Any]) -> str:
    ours, theirs = rec["upwatch"], rec["blackbox_exporter"]
    lines = [f"== upwatch bench tcp: {rec['monitors']:,} probes each, "
             f"{rec['concurrency']} at a time, loopback targets =="]
    if "missing" in theirs:
        lines.append("  blackbox_exporter: " + theirs["missing"])
    fleet = rec.get("fleet") or {}
    if fleet:
        late = fleet.get("lateness_ms") or {}
        lines.append(f"  fleet: {fleet['monitors']:,} tcp monitors at {fleet['interval_s']:g} s"
                     f" for {fleet['window_s']:g} s: held {fleet['held']}, lateness p50"
                     f" {late.get('p50')} ms, p99 {late.get('p99')} ms, error rate"
                     f" {fleet['error_rate']}, engine CPU per probe"
                     f" {fleet['cpu_s_per_probe']} s")
    lines.append(f"  {'':<28}{'upwatch':>16}{'blackbox_exporter':>20}")
    for label, key in (("CPU us per probe", "cpu_us_per_probe"), ("CPU seconds", "cpu_s"),
                       ("wall seconds", "wall_s")):
        lines.append(f"  {label:<28}{ours.get(key, '-'):>16}{theirs.get(key, '-'):>20}")
    lines.append(f"  {'failed probes':<28}{sum(ours['errors'].values()):>16}"
                 f"{sum((theirs.get('errors') or {}).values()):>20}")
    met = "met" if rec["target_met"] else "MISSED"
    lines.append(f"  CPU ratio upwatch / blackbox_exporter: {rec['cpu_ratio']} "
                 f"(target <= {rec['target_ratio']}: {met})")
    return "\n".join(lines)
