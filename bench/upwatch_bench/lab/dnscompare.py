"""c-ares (``aiodns``) against ``dnspython``'s asynchronous resolver, on the probes' workload:
``python -m upwatch_bench.lab.dnscompare [NAMES] [IN_FLIGHT]``.

A DNS server (upwatch_bench/roles/dnsserver.py) runs in a child process on the other cores; this
process, pinned to the last core, looks up NAMES distinct names (A only, TTL 0 so c-ares's own
query cache never answers), IN_FLIGHT at a time, once with each library, alternating over
three rounds. Printed per library: CPU (user+sys of this process, every thread included) and
wall time per lookup. This is the cost of a cache miss; the engine's cache answers every other
lookup without either library.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from upwatch_bench.stats import cpu_seconds

ZONE = "cmp.test"


async def _run(lookup: Callable[[str], Awaitable[Any]], names: list[str],
               in_flight: int) -> tuple[float, float, int]:
    sem = asyncio.Semaphore(in_flight)
    failed = 0

    async def one(name: str) -> None:
        nonlocal failed
        async with sem:
            try:
                await lookup(name)
            except Exception:
                failed += 1

    c0, t0 = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(one(n) for n in names))
    return cpu_seconds() - c0, time.perf_counter() - t0, failed


async def _compare(server: str, n: int, in_flight: int) -> dict[str, list[tuple[float, float]]]:
    import aiodns
    import dns.asyncresolver

    host, port = server.rsplit(":", 1)
    cares = aiodns.DNSResolver(nameservers=[server], timeout=2.0, tries=2)
    dnspy = dns.asyncresolver.Resolver(configure=False)
    dnspy.nameservers = [host]
    dnspy.port = int(port)
    dnspy.lifetime = 4.0

    async def by_cares(name: str) -> Any:
        return await cares.getaddrinfo(name, family=socket.AF_INET)

    # The same library without its event thread: c-ares's sockets on the event loop, as
    # the engine's resolver drives it (engine/probes/resolver.py).
    from engine.probes.resolver import _Cares

    unthreaded = _Cares(asyncio.get_running_loop(), [server], 2.0, 2)

    async def by_cares_loop(name: str) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(result: Any, error: int | None) -> None:
            if error is None:
                fut.set_result(result)
            else:
                fut.set_exception(OSError(error, "lookup failed"))

        unthreaded.getaddrinfo(name, socket.AF_INET, done)
        return await fut

    async def by_dnspython(name: str) -> Any:
        return await dnspy.resolve(name, "A")

    out: dict[str, list[tuple[float, float]]] = {
        "aiodns (c-ares)": [], "c-ares on the loop": [], "dnspython": []}
    for r in range(3):
        for v, (label, fn) in enumerate((("aiodns (c-ares)", by_cares),
                                         ("c-ares on the loop", by_cares_loop),
                                         ("dnspython", by_dnspython))):
            names = [f"m{i}-{r}-{v}.{ZONE}" for i in range(n)]
            cpu, wall, failed = await _run(fn, names, in_flight)
            if failed:
                print(f"{label}: {failed} lookups failed", file=sys.stderr)
            out[label].append((cpu / n * 1e6, wall / n * 1e6))
    await cares.close()
    unthreaded.close()
    return out


def main(argv: list[str]) -> int:
    import uvloop

    n = int(argv[1]) if len(argv) > 1 else 5000
    in_flight = int(argv[2]) if len(argv) > 2 else 100
    cpus = sorted(os.sched_getaffinity(0))
    code = ("import asyncio, sys; from upwatch_bench.roles.dnsserver import DnsServer\n"
            "async def m():\n"
            f"    async with DnsServer(zone={ZONE!r}, addresses=['127.0.1.1'], ttl=0) as s:\n"
            "        print(s.address, flush=True); await asyncio.sleep(3600)\n"
            "asyncio.run(m())\n")
    cmd = [sys.executable, "-c", code]
    if len(cpus) > 1:
        cmd = ["taskset", "-c", ",".join(map(str, cpus[:-1])), *cmd]
        os.sched_setaffinity(0, {cpus[-1]})
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)  # noqa: S603 (our own)
    try:
        assert proc.stdout is not None
        server = proc.stdout.readline().strip()
        res = uvloop.run(_compare(server, n, in_flight))
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"{n} distinct names, {in_flight} in flight, 3 rounds alternating "
          "(us per lookup: CPU / wall)")
    for label, rounds in res.items():
        print(f"  {label:18s} " + "  ".join(f"{c:7.1f} / {w:6.1f}" for c, w in rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
