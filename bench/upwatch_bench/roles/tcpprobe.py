"""Upwatch's tcp prober as a child role, for the side-by-side CPU figure (``upwatch bench
tcp``): on the ``go`` command it makes ``probes`` tcp:// probes of ``targets`` (``[host,
port]`` pairs, round robin), ``concurrency`` at a time, on uvloop as the engine does, and
emits ``done`` with the failures. The parent reads this process's CPU time around it from
/proc, as it reads blackbox_exporter's."""

from __future__ import annotations

from typing import Any

from upwatch_bench.roles.rounds import serve_rounds


async def _probe_all(cfg: dict[str, Any]) -> None:
    from engine.probes.tcp import TcpProber

    prober = TcpProber(timeout=float(cfg.get("timeout", 5.0)), allow_private=True)
    urls = [f"tcp://{host}:{port}" for host, port in cfg["targets"]]
    await serve_rounds(prober.probe, urls, cfg)
    await prober.aclose()


def run(cfg: dict[str, Any]) -> int:
    import uvloop

    uvloop.run(_probe_all(cfg))
    return 0
