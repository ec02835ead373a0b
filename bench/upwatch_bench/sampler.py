"""What the machine did around a measured window: every half second the busy share of each
core (``/proc/stat``) and the CPU seconds of named groups of processes, so a window can say
which side was saturated."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from upwatch_bench.database import CLK_TCK


class Sampler:
    """Every half second: the busy share of each core (``/proc/stat``) and the CPU seconds of
    the world's processes (nginx, its backend, the DNS server, the database), so a window
    can say which side was saturated."""

    def __init__(self, pids: Callable[[], dict[str, list[int]]],
                 db_cpu: Callable[[], float | None]) -> None:
        self._pids = pids
        self._db_cpu = db_cpu
        self.samples: list[tuple[float, dict[str, tuple[float, float]], dict[str, float]]] = []

    @staticmethod
    def _cores() -> dict[str, tuple[float, float]]:
        out: dict[str, tuple[float, float]] = {}
        with contextlib.suppress(OSError), open("/proc/stat", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("cpu") and line[3:4].isdigit():
                    name, *fields = line.split()
                    values = [float(x) for x in fields[:8]]
                    out[name] = (sum(values) - values[3] - values[4], sum(values))
        return out

    def _processes(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, pids in self._pids().items():
            total = 0.0
            for pid in pids:
                with contextlib.suppress(OSError, IndexError, ValueError):
                    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                    total += (int(fields[11]) + int(fields[12])) / CLK_TCK
            out[name] = total
        db = self._db_cpu()
        if db is not None:
            out["database"] = db
        return out

    async def run(self) -> None:
        while True:
            self.samples.append((time.time(), self._cores(), self._processes()))
            await asyncio.sleep(0.5)

    def recent_cores(self, name: str, seconds: float) -> float | None:
        """Cores process group ``name`` used over the last ``seconds`` of samples (None
        until there are two samples that far apart)."""
        if not self.samples:
            return None
        last = self.samples[-1]
        first = next((s for s in reversed(self.samples) if last[0] - s[0] >= seconds), None)
        if first is None or name not in last[2] or name not in first[2]:
            return None
        return (last[2][name] - first[2][name]) / (last[0] - first[0])

    async def settle(self, name: str, below: float, seconds: float, limit: float) -> float:
        """Wait, at most ``limit`` seconds, until ``name`` used fewer than ``below`` cores
        over the last ``seconds`` (not at all when it is not sampled: a database elsewhere);
        the seconds waited."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        while loop.time() - start < limit:
            if self.samples and name not in self.samples[-1][2]:
                break
            used = self.recent_cores(name, seconds)
            if used is not None and used < below:
                break
            await asyncio.sleep(0.5)  # the next sample; a bounded poll of a reading
        return round(loop.time() - start, 1)

    def window(self, start: float, end: float) -> dict[str, Any]:
        """Core busy shares and the processes' cores used between two wall times."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {}
        (t0, c0, p0), (t1, c1, p1) = inside[0], inside[-1]
        cores = {k: round((c1[k][0] - c0[k][0]) / (c1[k][1] - c0[k][1]), 3)
                 for k in c1 if k in c0 and c1[k][1] > c0[k][1]}
        procs = {k: round((p1[k] - p0.get(k, 0.0)) / (t1 - t0), 3) for k in p1}
        return {"cores_busy": cores, "world_cpu_cores": procs}

