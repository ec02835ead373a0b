"""Upwatch's tcp prober as a child role, for the side-by-side CPU figure (``upwatch bench
tcp``): on the ``go`` command it makes ``probes`` tcp:// probes of ``targets`` (``[host,
port]`` pairs, round robin), ``concurrency`` at a time, on uvloop as the engine does, and
emits ``done`` with the failures. The parent reads this process's CPU time around it from
/proc, as it reads blackbox_exporter's."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from upwatch_bench.child import commands, emit


async def _probe_all(cfg: dict[str, Any]) -> None:
    from engine.probes.tcp import TcpProber

    prober = TcpProber(timeout=float(cfg.get("timeout", 5.0)), allow_private=True)
    urls = [f"tcp://{host}:{port}" for host, port in cfg["targets"]]
    emit("ready")
    async for msg in commands():
        if msg.get("cmd") == "stop":
            break
        if msg.get("cmd") != "go":
            continue
        total = int(msg.get("probes", cfg["probes"]))
        errors: dict[str, int] = {}
        t0 = time.perf_counter()
        await _run(prober, urls, total, int(cfg["concurrency"]), errors)
        emit("done", probes=total, errors=errors, wall_s=time.perf_counter() - t0)
    await prober.aclose()


async def _run(prober: Any, urls: list[str], total: int, concurrency: int,
               errors: dict[str, int]) -> None:
    """``total`` probes of ``urls`` (round robin), ``concurrency`` at a time; failures
    counted in ``errors`` by their words."""
    next_i = 0

    async def worker() -> None:
        nonlocal next_i
        while next_i < total:
            i = next_i
            next_i += 1
            out = await prober.probe(urls[i % len(urls)])
            if out.error is not None:
                errors[out.error] = errors.get(out.error, 0) + 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def run(cfg: dict[str, Any]) -> int:
    import uvloop

    uvloop.run(_probe_all(cfg))
    return 0
