"""CPU per probe side by side: Upwatch's prober in a child beside Prometheus
blackbox_exporter asked for the same probes, each process's CPU time (user + system, from
``/proc/PID/stat``) read around its probes, after a warm-up, on the engine's core.

- :func:`child_side`: a probe role that runs rounds on command (``roles/rounds.py``);
- :class:`Exporter`: blackbox_exporter with one module, on a free loopback port, stopped on
  the way out; :func:`exporter_probes` asks it for probes through ``/probe`` the way
  Prometheus does, one HTTP request per probe (its figure includes that HTTP handling);
- :func:`blackbox_side`: the two together, warm-up and measured probes;
- :func:`cpu_figures`: the record of one side.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

from upwatch_bench import layout
from upwatch_bench.harness import Bench
from upwatch_bench.procs import pin_pid
from upwatch_bench.stats import process_cpu_s

BLACKBOX = "prometheus-blackbox-exporter"
UP_WITHIN_S = 20.0


def cpu_figures(n: int, cpu: float, wall: float, errors: dict[str, int],
                requests: int | None = None) -> dict[str, Any]:
    """One side's record: ``n`` probes, their CPU seconds and wall time, failures by their
    words; with ``requests`` (per probe) also the figure per request."""
    out: dict[str, Any] = {"probes": n}
    if requests is not None:
        out["requests_per_probe"] = requests
    out["cpu_s"] = round(cpu, 3)
    out["cpu_us_per_probe"] = round(cpu / n * 1e6, 1)
    if requests is not None:
        out["cpu_us_per_request"] = round(cpu / n / requests * 1e6, 1)
    out["wall_s"] = round(wall, 3)
    out["errors"] = errors
    return out


async def child_side(b: Bench, name: str, role: str, cfg: dict[str, Any], n: int, *,
                     warmup: int, warm_s: float, run_s: float,
                     requests: int | None = None) -> dict[str, Any]:
    """The child ``role`` (config ``cfg``) on the engine's core: ``warmup`` probes (within
    ``warm_s``), then ``n`` (within ``run_s``) with its CPU read around them."""
    child = await b.procs.spawn(name, role, {**cfg, "probes": n}, b.engine_cpus)
    try:
        await child.expect("ready", 30)
        child.send(cmd="go", probes=warmup)
        await child.expect("done", warm_s)
        pid = child.proc.pid
        cpu0 = process_cpu_s(pid)
        child.send(cmd="go", probes=n)
        done = await child.expect("done", run_s, b.progress.tick)
        cpu = process_cpu_s(pid) - cpu0
    finally:
        await b.procs.stop(child)
    return cpu_figures(n, cpu, float(done["wall_s"]), done["errors"], requests)


class Exporter:
    """blackbox_exporter with the configuration ``config`` (written to
    ``blackbox-NAME.yml`` in ``workdir``, its log beside it), on a free port of 127.0.0.1,
    pinned to ``cpus`` when given. ``async with``: started and listening (at most
    ``UP_WITHIN_S``) inside, stopped on the way out (SIGTERM, SIGKILL after 10 s)."""

    def __init__(self, exe: str, workdir: Path, name: str, config: str,
                 cpus: set[int] | None) -> None:
        self.exe = exe
        self.workdir = workdir
        self.name = name
        self.config = config
        self.cpus = cpus
        self.port = 0
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def probe_url(self, module: str, target: str) -> str:
        """The ``/probe`` URL asking for one probe of ``target`` with ``module``."""
        return f"http://127.0.0.1:{self.port}/probe?module={module}&target={target}"

    async def __aenter__(self) -> Exporter:
        config = self.workdir / f"blackbox-{self.name}.yml"
        config.write_text(self.config)
        self.port = layout.free_port("127.0.0.1")
        log = (self.workdir / f"blackbox-{self.name}.log").open("wb")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                self.exe, f"--config.file={config}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log)
        finally:
            log.close()  # the child holds its own descriptor
        try:
            pin_pid(self._proc.pid, self.cpus)
            await self._until_up()
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    async def _until_up(self) -> None:
        for _ in range(round(UP_WITHIN_S / 0.1)):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            return
        raise RuntimeError(f"blackbox_exporter did not start listening within "
                           f"{UP_WITHIN_S:g} s")

    async def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def exporter_probes(exporter: Exporter, module: str, targets: list[str], n: int,
                          concurrency: int) -> dict[str, int]:
    """``n`` probes of ``targets`` (round robin) through the exporter's ``/probe`` over
    keep-alive connections, ``concurrency`` at a time; failures (not 200, or not
    ``probe_success 1``) by kind."""
    import aiohttp

    failures: dict[str, int] = {}
    next_i = 0
    base = exporter.probe_url(module, "")
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal next_i
            while next_i < n:
                target = targets[next_i % len(targets)]
                next_i += 1
                async with session.get(base + target) as resp:
                    text = await resp.text()
                if resp.status != 200 or "\nprobe_success 1" not in text:
                    key = f"status {resp.status}" if resp.status != 200 else "probe_success 0"
                    failures[key] = failures.get(key, 0) + 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return failures


async def blackbox_side(b: Bench, name: str, config: str, module: str, targets: list[str],
                        n: int, *, warmup: int, concurrency: int,
                        requests: int | None = None) -> dict[str, Any]:
    """blackbox_exporter (``config``'s ``module``) on the engine's core: ``warmup`` probes of
    ``targets``, then ``n`` with its CPU read around them; ``{"missing": why}`` when it is
    not installed."""
    exe = shutil.which(BLACKBOX)
    if exe is None:
        return {"missing": f"{BLACKBOX} is not installed (Debian package of that name)"}
    async with Exporter(exe, b.workdir, name, config, b.engine_cpus) as exporter:
        await exporter_probes(exporter, module, targets, warmup, concurrency)
        cpu0 = process_cpu_s(exporter.pid)
        t0 = time.perf_counter()
        failures = await exporter_probes(exporter, module, targets, n, concurrency)
        wall = time.perf_counter() - t0
        cpu = process_cpu_s(exporter.pid) - cpu0
    return cpu_figures(n, cpu, wall, failures, requests)
