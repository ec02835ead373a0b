"""Ping probes as a child role, for the side-by-side CPU figure (``upwatch bench icmp``).

``impl`` says whose: ``upwatch`` (:class:`engine.probes.icmp.IcmpProber`, one socket per
family shared by every probe) or ``icmplib`` (its ``async_ping``, a socket per probe). On
each ``go`` command it makes ``probes`` probes of ``count`` echo requests to ``targets``
(round robin), ``concurrency`` at a time, on uvloop as the engine does, and emits ``done``
with the failures. The parent reads this process's CPU time around it from /proc, as it
reads blackbox_exporter's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from upwatch_bench.roles.rounds import Probe, serve_rounds


@dataclass(frozen=True, slots=True)
class _Reply:
    error: str | None


def _upwatch(cfg: dict[str, Any]) -> tuple[Probe, Callable[[], Awaitable[None]]]:
    from engine.probes.icmp import IcmpProber, PingResult

    prober = IcmpProber(timeout=float(cfg["timeout"]), allow_private=True)
    count, interval = int(cfg["count"]), float(cfg["interval"])

    async def probe(host: str) -> PingResult:
        return await prober.ping(host, count, interval)

    return probe, prober.aclose


def _icmplib(cfg: dict[str, Any]) -> tuple[Probe, Callable[[], Awaitable[None]]]:
    from icmplib import async_ping

    count, interval = int(cfg["count"]), float(cfg["interval"])
    timeout = float(cfg["timeout"])

    async def probe(host: str) -> _Reply:
        got = await async_ping(host, count=count, interval=interval, timeout=timeout,
                               privileged=True)
        return _Reply(None if got.packets_received else "no reply")

    async def close() -> None:
        return None

    return probe, close


async def _probe_all(cfg: dict[str, Any]) -> None:
    probe, close = _upwatch(cfg) if cfg["impl"] == "upwatch" else _icmplib(cfg)
    await serve_rounds(probe, list(cfg["targets"]), cfg)
    await close()


def run(cfg: dict[str, Any]) -> int:
    import uvloop

    uvloop.run(_probe_all(cfg))
    return 0
