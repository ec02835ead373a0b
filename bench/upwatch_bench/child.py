"""Entry point of every bench child: ``python -m upwatch_bench.child CONFIG.json``.

Protocol with the parent (:mod:`upwatch_bench.procs`):

- the config file holds ``role`` (which module runs), ``cpus`` (the cores to pin to) and
  the role's own keys;
- the child writes one JSON object per line on stdout, each with an ``event`` key
  (``ready``, ``result``, ...); logs and tracebacks go to stderr (a file the parent shows
  when something fails);
- the parent may write JSON command lines on stdin (``{"cmd": "stop"}``, ...); EOF on stdin
  means the parent is gone and the child ends.

A child dies with its parent (``PR_SET_PDEATHSIG``), so an interrupted or killed bench never
leaves load generators or targets running.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

import orjson

ROLES = {
    "targets": "upwatch_bench.roles.targets",
    "engine": "upwatch_bench.roles.engine_run",
    "inflight": "upwatch_bench.roles.engine_run",
    "baseline": "upwatch_bench.roles.baseline",
    "baseline_inflight": "upwatch_bench.roles.baseline",
    "loadgen": "upwatch_bench.roles.loadgen",
    "producer": "upwatch_bench.roles.loadgen",
    "deliverer": "upwatch_bench.roles.engine_run",
    "apiserver": "upwatch_bench.roles.apiserver",
    "node": "upwatch_bench.roles.node",
    "dns": "upwatch_bench.roles.dnsserver",
    "world_backend": "upwatch_bench.roles.worldserver",
    "world_dnscache": "upwatch_bench.roles.dnscache",
    "tcpprobe": "upwatch_bench.roles.tcpprobe",
    "icmpprobe": "upwatch_bench.roles.icmpprobe",
}

_PR_SET_PDEATHSIG = 1


def emit(event: str, **fields: Any) -> None:
    """One JSON line to the parent."""
    sys.stdout.write(orjson.dumps({"event": event, **fields}).decode() + "\n")
    sys.stdout.flush()


async def commands() -> AsyncIterator[dict[str, Any]]:
    """The parent's command lines; ends at EOF (the parent closed stdin or died)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            return
        with contextlib.suppress(orjson.JSONDecodeError):
            msg = orjson.loads(line)
            if isinstance(msg, dict):
                yield msg


def _die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the parent dies (Linux); harmless elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def pin(cpus: list[int] | None) -> None:
    """Pin this process (and what it starts later) to ``cpus``, when the OS allows it."""
    if cpus and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, set(cpus))


def run_reporting(main: Coroutine[Any, Any, object]) -> int:
    """Run ``main`` on uvloop, as the engine runs; 0 once it ends. An exception is first
    told to the parent as an ``error`` line (its type and words), then raised."""
    import uvloop

    try:
        uvloop.run(main)
    except Exception as exc:
        emit("error", message=f"{type(exc).__name__}: {exc}")
        raise
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python -m upwatch_bench.child CONFIG.json\n")
        return 2
    cfg = orjson.loads(Path(argv[1]).read_bytes())
    _die_with_parent()
    pin(cfg.get("cpus"))
    module = importlib.import_module(ROLES[cfg["role"]])
    code: int = module.run(cfg)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
