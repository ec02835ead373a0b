"""The machine's limit: ``wrk`` and ``openssl s_time`` against the same loopback targets.

Both are C programs that do the least a client can do per connection, so they show what the
kernel, the loopback and the targets allow per CPU second of the client. Each runs pinned to
the engine's core and is reaped with ``wait4``, so its own user+sys CPU time is exact; the
ratio the bench reports compares work per CPU second, which a rate-limited run of the engine
(N monitors at a fixed interval) and a saturating tool can both be measured in.

Absent tools are not an error: the figures are None and the report says why.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from upwatch_bench.procs import Procs

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


@dataclass
class ToolRun:
    """One run of a limit tool: operations done, over what time, at what CPU cost."""

    tool: str
    operations: int
    seconds: float
    cpu_s: float
    errors: int
    latency_ms: dict[str, float | None] | None = None
    user_s: float | None = None  # cpu_s apart, when known
    sys_s: float | None = None
    resumed: int | None = None  # s_time: connections that resumed a session

    @property
    def per_s(self) -> float | None:
        return self.operations / self.seconds if self.seconds > 0 else None

    @property
    def per_cpu_s(self) -> float | None:
        return self.operations / self.cpu_s if self.cpu_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool, "operations": self.operations, "seconds": round(self.seconds, 3),
            "cpu_s": round(self.cpu_s, 4), "errors": self.errors,
            "per_s": round(self.per_s, 1) if self.per_s else None,
            "per_cpu_s": round(self.per_cpu_s, 1) if self.per_cpu_s else None,
            "latency_ms": self.latency_ms,
            "user_s": None if self.user_s is None else round(self.user_s, 4),
            "sys_s": None if self.sys_s is None else round(self.sys_s, 4),
            **({} if self.resumed is None else {"resumed": self.resumed}),
        }


def _ms(value: str, unit: str) -> float:
    return float(value) * _UNITS[unit]


def parse_wrk(text: str) -> dict[str, Any]:
    """Counts of a ``wrk`` report: requests, seconds, errors (socket errors plus non-2xx/3xx)
    and, with ``--latency``, the p50/p99 latency in ms."""
    out: dict[str, Any] = {"requests": 0, "seconds": 0.0, "errors": 0, "latency_ms": None}
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)\b", text)
    if m:
        out["requests"] = int(m.group(1))
        out["seconds"] = _ms(m.group(2), m.group(3)) / 1000.0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        out["errors"] += sum(int(g) for g in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        out["errors"] += int(m.group(1))
    pct = dict(re.findall(r"^\s+(50|99)(?:\.0+)?%\s+([\d.]+(?:us|ms|s|m))\s*$", text, re.M))
    if pct:
        def conv(v: str) -> float:
            n = re.match(r"([\d.]+)(us|ms|s|m)", v)
            assert n is not None
            return round(_ms(n.group(1), n.group(2)), 3)
        out["latency_ms"] = {"p50": conv(pct["50"]) if "50" in pct else None,
                             "p99": conv(pct["99"]) if "99" in pct else None}
    return out


def parse_s_time(text: str) -> dict[str, Any]:
    """Handshakes counted by ``openssl s_time -new``: ``N connections in T real seconds``."""
    m = re.search(r"(\d+) connections in ([\d.]+) real seconds", text)
    if not m:
        m = re.search(r"(\d+) connections in ([\d.]+)s", text)
    if not m:
        return {"handshakes": 0, "seconds": 0.0}
    # One letter per timed connection: "r" when it resumed a session (-reuse), else the
    # version's ("*", "t", "3"), on the lines after "starting".
    marks = "".join(re.findall(r"^[rt*3]+$", text.split("starting")[-1], re.M))
    return {"handshakes": int(m.group(1)), "seconds": float(m.group(2)),
            "resumed": marks.count("r")}


def wrk_available() -> str | None:
    return shutil.which("wrk")


def openssl_available() -> str | None:
    return shutil.which("openssl")


def write_id_script(path: Path, prefix: str, ids: list[int]) -> Path:
    """A wrk Lua script requesting ``prefix<id>`` for ids drawn at random."""
    listing = ",".join(str(i) for i in ids)
    path.write_text(
        f"local ids = {{{listing}}}\n"
        "math.randomseed(7)\n"
        "request = function()\n"
        f'  return wrk.format(nil, "{prefix}" .. ids[math.random(#ids)])\n'
        "end\n",
        encoding="ascii",
    )
    return path


async def run_wrk(
    procs: Procs,
    url: str,
    *,
    seconds: float,
    connections: int,
    cpus: set[int] | None,
    headers: list[str] | tuple[str, ...] = (),
    script: Path | None = None,
    latency: bool = False,
    on_start: Callable[[int], object] | None = None,
) -> ToolRun | None:
    """``wrk -t1`` for ``seconds``; None when wrk is not installed. ``on_start``: called
    with wrk's pid (see :meth:`Procs.run_measured`)."""
    exe = wrk_available()
    if exe is None:
        return None
    argv = [exe, "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "5s"]
    for h in headers:
        argv += ["-H", h]
    if script is not None:
        argv += ["-s", str(script)]
    if latency:
        argv.append("--latency")
    argv.append(url)
    run = await procs.run_measured("wrk", argv, cpus=cpus, timeout=seconds + 30,
                                   on_start=on_start)
    if run.returncode != 0:
        raise RuntimeError(f"wrk failed ({run.returncode}): {run.stderr.strip()[-500:]}")
    parsed = parse_wrk(run.stdout)
    return ToolRun("wrk", parsed["requests"], parsed["seconds"] or run.wall_s, run.cpu_s,
                   parsed["errors"], parsed["latency_ms"], run.user_s, run.sys_s)


async def run_s_time(
    procs: Procs, host: str, port: int, *, seconds: float, cpus: set[int] | None, cafile: Path,
    parallel: int = 4, reuse: bool = False, www: str | None = None,
) -> ToolRun | None:
    """``openssl s_time -new``: full handshakes for ``seconds``; None when openssl is not
    installed. ``reuse``: ``-reuse`` instead (one full handshake, then resumed sessions).
    ``www``: a path to GET (HTTP/1.0) and read to the end on every connection.

    One s_time makes one connection at a time and sleeps while the server answers, so its
    CPU per handshake includes a wake-up per round trip. ``parallel`` copies on the same
    core keep it busy, as the engine's concurrent probes keep theirs: handshakes and CPU
    seconds are summed over the copies."""
    exe = openssl_available()
    if exe is None:
        return None
    mode = "-reuse" if reuse else "-new"
    argv = [exe, "s_time", "-connect", f"{host}:{port}", mode,
            "-time", str(max(1, round(seconds))), "-CAfile", str(cafile)]
    if www is not None:
        argv += ["-www", www]
    runs = await asyncio.gather(*(
        procs.run_measured("s_time", argv, cpus=cpus, timeout=seconds + 30)
        for _ in range(max(1, parallel))
    ))
    handshakes = resumed = 0
    for run in runs:
        parsed = parse_s_time(run.stdout)
        if run.returncode != 0 and not parsed["handshakes"]:
            raise RuntimeError(f"openssl s_time failed ({run.returncode}): "
                               f"{(run.stderr or run.stdout).strip()[-500:]}")
        handshakes += parsed["handshakes"]
        resumed += parsed["resumed"]
    # The tools' own wall time: s_time prints whole seconds only.
    return ToolRun(f"openssl s_time {mode}{'' if www is None else ' -www ' + www} x{len(runs)}",
                   handshakes, max(r.wall_s for r in runs), sum(r.cpu_s for r in runs), 0,
                   user_s=sum(r.user_s for r in runs), sys_s=sum(r.sys_s for r in runs),
                   resumed=resumed)
