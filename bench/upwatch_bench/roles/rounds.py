"""Rounds of probes on command, the loop of the side-by-side probe roles (``tcpprobe``,
``icmpprobe``): the role says ``ready``; on each ``go`` command it makes ``probes`` probes
of its targets (round robin), ``concurrency`` at a time, and says ``done`` with the
failures by their words and the round's wall time; ``stop`` or EOF ends it. The parent
reads the child's CPU time around a round from /proc (upwatch_bench/sidebyside.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from upwatch_bench.child import commands, emit


class Outcome(Protocol):
    """What a probe gives back: ``error`` None when it succeeded, else its words."""

    @property
    def error(self) -> str | None: ...


Probe = Callable[[str], Awaitable[Outcome]]


async def probe_round(probe: Probe, targets: list[str], total: int,
                      concurrency: int) -> dict[str, int]:
    """``total`` probes of ``targets`` (round robin), ``concurrency`` at a time; failures by
    their words."""
    next_i = 0
    errors: dict[str, int] = {}

    async def worker() -> None:
        nonlocal next_i
        while next_i < total:
            i = next_i
            next_i += 1
            out = await probe(targets[i % len(targets)])
            if out.error is not None:
                errors[out.error] = errors.get(out.error, 0) + 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return errors


async def serve_rounds(probe: Probe, targets: list[str], cfg: dict[str, Any]) -> None:
    """``ready``, then a round per ``go`` command (``probes`` of the command, else of
    ``cfg``; ``cfg["concurrency"]`` at a time) until ``stop`` or EOF."""
    emit("ready")
    async for msg in commands():
        if msg.get("cmd") == "stop":
            break
        if msg.get("cmd") != "go":
            continue
        total = int(msg.get("probes", cfg["probes"]))
        t0 = time.perf_counter()
        errors = await probe_round(probe, targets, total, int(cfg["concurrency"]))
        emit("done", probes=total, errors=errors, wall_s=time.perf_counter() - t0)
