"""Ping probes as a child role, for the side-by-side CPU figure (``upwatch bench icmp``).

``impl`` says whose: ``upwatch`` (:class:`engine.probes.icmp.IcmpProber`, one socket per
family shared by every probe) or ``icmplib`` (its ``async_ping``, a socket per probe). On
each ``go`` command it makes ``probes`` probes of ``count`` echo requests to ``targets``
(round robin), ``concurrency`` at a time, on uvloop as the engine does, and emits ``done``
with the failures. The parent reads this process's CPU time around it from /proc, as it
reads blackbox_exporter's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from upwatch_bench.child import commands, emit


def _upwatch(cfg: dict[str, Any]) -> tuple[Callable[[str], Awaitable[str | None]], Any]:
    from engine.probes.icmp import IcmpProber

    prober = IcmpProber(timeout=float(cfg["timeout"]), allow_private=True)
    count, interval = int(cfg["count"]), float(cfg["interval"])

    async def probe(host: str) -> str | None:
        got = await prober.ping(host, count, interval)
        return got.error

    return probe, prober.aclose


def _icmplib(cfg: dict[str, Any]) -> tuple[Callable[[str], Awaitable[str | None]], Any]:
    from icmplib import async_ping

    count, interval = int(cfg["count"]), float(cfg["interval"])
    timeout = float(cfg["timeout"])

    async def probe(host: str) -> str | None:
        got = await async_ping(host, count=count, interval=interval, timeout=timeout,
                               privileged=True)
        return None if got.packets_received else "no reply"

    async def close() -> None:
        return None

    return probe, close


async def _round(probe: Callable[[str], Awaitable[str | None]], targets: list[str],
                 total: int, concurrency: int) -> dict[str, int]:
    """``total`` probes, ``concurrency`` at a time; failures by their words."""
    next_i = 0
    errors: dict[str, int] = {}

    async def worker() -> None:
        nonlocal next_i
        while next_i < total:
            i = next_i
            next_i += 1
            error = await probe(targets[i % len(targets)])
            if error is not None:
                errors[error] = errors.get(error, 0) + 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return errors


async def _probe_all(cfg: dict[str, Any]) -> None:
    probe, close = _upwatch(cfg) if cfg["impl"] == "upwatch" else _icmplib(cfg)
    targets = list(cfg["targets"])
    emit("ready")
    async for msg in commands():
        if msg.get("cmd") == "stop":
            break
        if msg.get("cmd") != "go":
            continue
        total = int(msg.get("probes", cfg["probes"]))
        t0 = time.perf_counter()
        errors = await _round(probe, targets, total, int(cfg["concurrency"]))
        emit("done", probes=total, errors=errors, wall_s=time.perf_counter() - t0)
    await close()


def run(cfg: dict[str, Any]) -> int:
    import uvloop

    uvloop.run(_probe_all(cfg))
    return 0
