"""``upwatch bench dns``: CPU per dns:// probe, Upwatch's against Prometheus
blackbox_exporter's ``dns`` module, side by side in one run, on the same loopback server.

The DNS server is the bench's (upwatch_bench/roles/dnsserver.py), a child on the other
cores, asked for ``m1.names.test`` A. Then, in turns (ours, theirs, ours, theirs):

* **ours**: ``--monitors`` probes (default 4,000) of ``engine.probes.dns.DnsProber`` in this
  process on its uvloop loop, ``CONCURRENCY`` at once; CPU = this process's user+system time
  over the probes. Twice: as it runs (a reply the same as the last one for the URL is not
  parsed again: the server's answer here does not change) and with every reply parsed
  (``keep_replies=False``: a resolver's answer, whose TTLs count down, or a rotating one);
* **theirs**: the same number of ``/probe?module=dns&target=...`` requests to a
  ``prometheus-blackbox-exporter`` started for the run, ``CONCURRENCY`` at once; CPU = the
  exporter process's user+system time (``/proc/PID/stat``) over the probes. Its probes are
  asked for the way Prometheus asks: one HTTP request per probe (what the exporter costs as
  deployed); the requests' own client cost is this process's, not counted.

The record: CPU microseconds per probe each way (the better of the two turns) and their
ratio (issue: at most 0.5).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

from upwatch_bench.harness import Bench
from upwatch_bench.sidebyside import BLACKBOX, Exporter
from upwatch_bench.stats import process_cpu_s

CONCURRENCY = 50
DEFAULT_PROBES = 4000
QUERY = "m1.names.test"
_CONFIG = ("modules:\n  dns_a:\n    prober: dns\n    timeout: 5s\n    dns:\n"
           f"      query_name: {QUERY}\n      query_type: A\n"
           "      transport_protocol: udp\n      preferred_ip_protocol: ip4\n"
           "      valid_rcodes: [NOERROR]\n")


def _shares(probes: int) -> list[int]:
    """``probes`` split over ``CONCURRENCY`` workers."""
    return [probes // CONCURRENCY + (1 if i < probes % CONCURRENCY else 0)
            for i in range(CONCURRENCY)]


def _figures(probes: int, failed: int, cpu: float, wall: float) -> dict[str, Any]:
    return {"probes": probes, "failed": failed, "cpu_s": round(cpu, 3),
            "wall_s": round(wall, 3), "cpu_us_per_probe": round(cpu / probes * 1e6, 1)}


async def ours(server: str, probes: int, keep_replies: bool) -> dict[str, Any]:
    """CPU per probe of :class:`engine.probes.dns.DnsProber` here, ``probes`` probes."""
    from engine.probes.dns import DnsProber

    prober = DnsProber(timeout=5.0, allow_private=True, keep_replies=keep_replies)
    url = f"dns://{server}/{QUERY}?type=A"
    failed = 0

    async def worker(n: int) -> None:
        nonlocal failed
        for _ in range(n):
            out = await prober.probe(url)
            if out.error is not None or out.assertion_error is not None:
                failed += 1

    share = _shares(probes)
    await prober.probe(url)  # the question's template built before the clock starts
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(n) for n in share))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    return _figures(probes, failed, cpu, wall)


async def theirs(server: str, probes: int, workdir: Path) -> dict[str, Any]:
    """CPU per probe of blackbox_exporter's dns module, ``probes`` probes over HTTP (one
    session: the warm-up's connection is kept; the exporter is not pinned)."""
    import aiohttp

    failed = 0
    async with Exporter(BLACKBOX, workdir, "dns", _CONFIG, None) as exporter:
        target = exporter.probe_url("dns_a", server)
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session:
            async with session.get(target) as r:  # warm, not counted
                await r.read()

            async def worker(n: int) -> None:
                nonlocal failed
                for _ in range(n):
                    async with session.get(target) as r:
                        body = await r.read()
                    if b"probe_success 1" not in body:
                        failed += 1

            share = _shares(probes)
            cpu0, t0 = process_cpu_s(exporter.pid), time.perf_counter()
            await asyncio.gather(*(worker(n) for n in share))
            cpu, wall = process_cpu_s(exporter.pid) - cpu0, time.perf_counter() - t0
    return _figures(probes, failed, cpu, wall)


async def scenario_dns(b: Bench) -> dict[str, Any]:
    """Two turns of ours and theirs on one loopback server; the record."""
    if shutil.which(BLACKBOX) is None:
        raise RuntimeError(f"{BLACKBOX} is not installed (Debian: apt install {BLACKBOX})")
    probes = b.opts.monitors or DEFAULT_PROBES
    await b.start_dns(["192.0.2.1"], "names.test")
    assert b.dns_address is not None
    server = b.dns_address
    turns: dict[str, list[dict[str, Any]]] = {
        "upwatch": [], "upwatch_every_reply_parsed": [], "blackbox_exporter": []}
    for i in range(2):
        b.progress.phase(f"dns probes, turn {i + 1}: upwatch", 30)
        turns["upwatch"].append(await ours(server, probes, True))
        turns["upwatch_every_reply_parsed"].append(await ours(server, probes, False))
        b.progress.phase(f"dns probes, turn {i + 1}: blackbox_exporter", 60)
        turns["blackbox_exporter"].append(await theirs(server, probes, b.workdir))
    best = {k: min(v, key=lambda r: r["cpu_us_per_probe"]) for k, v in turns.items()}
    theirs_us = best["blackbox_exporter"]["cpu_us_per_probe"]
    return {"scenario": "dns", "server": server, "query": f"{QUERY} A",
            "concurrency": CONCURRENCY, "turns": turns, "best": best,
            "cpu_ratio": round(best["upwatch"]["cpu_us_per_probe"] / theirs_us, 3),
            "cpu_ratio_every_reply_parsed": round(
                best["upwatch_every_reply_parsed"]["cpu_us_per_probe"] / theirs_us, 3)}


def table(rec: dict[str, Any]) -> str:
    """The record as a few lines."""
    lines = [f"dns:// probes, {rec['query']} at {rec['server']}, "
             f"{rec['concurrency']} at once (best of two turns):"]
    for name, r in rec["best"].items():
        lines.append(f"  {name:27} {r['cpu_us_per_probe']:8.1f} us CPU/probe  "
                     f"({r['probes']} probes, {r['failed']} failed, {r['wall_s']} s)")
    lines.append(f"  ratio upwatch/blackbox_exporter: {rec['cpu_ratio']} "
                 f"(every reply parsed: {rec['cpu_ratio_every_reply_parsed']})")
    return "\n".join(lines)
