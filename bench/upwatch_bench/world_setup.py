"""The internet world (upwatch_bench/world.py) set up for a scenario (``internet``,
``overload``): its backend, nginx and DNS server started on the cores the engine does not
use (:func:`served_world`), and its monitors seeded (:func:`seed_world`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import date, timedelta

from upwatch_bench import layout
from upwatch_bench.certs import WorldCerts, make_world_certs
from upwatch_bench.database import seed_monitors
from upwatch_bench.harness import Bench
from upwatch_bench.nginx import Nginx, ensure_nginx, nginx_conf
from upwatch_bench.procs import Child
from upwatch_bench.world import ADDRESS, INTERVAL_S, KEY_TYPE, SERVER_KINDS, ZONE, World


@dataclass(frozen=True)
class ServedWorld:
    """The world of ``--monitors`` sites as served: its certificates, nginx, its backend."""

    world: World
    certs: WorldCerts
    server: Nginx
    backend: Child


@contextlib.asynccontextmanager
async def served_world(b: Bench) -> AsyncIterator[ServedWorld]:
    """nginx (installed if missing), its backend and the bench's DNS server answering the
    world's names, every nginx socket listening; nginx stopped on the way out (the children
    end with the bench). Slow sites think past the probe timeout."""
    b.progress.phase("nginx: installing it if missing", 5)
    exe = await ensure_nginx()
    timeout = float(b.settings()["probe_timeout"])
    https_port = layout.free_port(ADDRESS["tls13-ecdsa"])
    http_port = https_port
    for _ in range(20):  # bounded: the kernel rarely hands the same port twice
        http_port = layout.free_port(ADDRESS["tls13-ecdsa"])
        if http_port != https_port:
            break
    world = World(b.opts.monitors, https_port, http_port, slow_ms=int((timeout + 2) * 1000))
    certs = make_world_certs(b.workdir / "world-certs", ZONE, ADDRESS,
                             {k: KEY_TYPE[k] for k in (*SERVER_KINDS, "badcert")},
                             expired=("badcert",))
    b.progress.phase("starting the world: backend, nginx, DNS", 3)
    backend_port = layout.free_port("127.0.0.1")
    backend = await b.procs.spawn(
        "world-backend", "world_backend",
        {"host": "127.0.0.1", "port": backend_port, "hang": [ADDRESS["hang"], https_port],
         "hang_cap_s": 900.0}, b.other_cpus)
    await backend.expect("ready", 30)
    server = Nginx(exe, b.workdir / "nginx")
    try:
        await server.start(nginx_conf(
            prefix=server.prefix, https_port=https_port, http_port=http_port,
            backend=f"127.0.0.1:{backend_port}", certs=certs.pairs,
            run_as_root=os.geteuid() == 0), b.other_cpus)
        await wait_listening(server, world)
        server.pin()
        await b.start_dns([], ZONE, world=world.to_dict())
        yield ServedWorld(world, certs, server, backend)
    finally:
        await server.stop()


def listen_points(world: World) -> list[tuple[str, int]]:
    """Every (address, port) nginx listens on."""
    points = [(ADDRESS[k], world.https_port) for k in (*SERVER_KINDS, "badcert")]
    points += [(ADDRESS[k], world.http_port) for k in (*SERVER_KINDS, "http")]
    return points


async def wait_listening(server: Nginx, world: World, seconds: float = 15.0) -> None:
    """Until every nginx socket accepts a connection (bounded); nginx's own words if not."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    for host, port in listen_points(world):
        while True:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2.0)
                writer.close()
                break
            except (OSError, TimeoutError):
                proc = server.proc
                if (proc is not None and proc.poll() is not None) or loop.time() > deadline:
                    raise RuntimeError(f"nginx does not listen on {host}:{port}: "
                                       + (server.log_tail()[-500:] or "no log")) from None
                await asyncio.sleep(0.05)


async def seed_world(b: Bench, world: World) -> None:
    """Uptime checks for every monitor; the bad-certificate ones also get their certificate
    check (the uptime probe does not verify certificates, so that is where they fail). Two
    accounts: seed_monitors adds checks to every monitor of its account."""
    account, _ = await b.store.create_account("bench-internet")
    certs_account, _ = await b.store.create_account("bench-internet-certs")
    today = date.today()
    await b.store.ensure_result_partitions(today - timedelta(days=1), 3)
    urls = world.urls()
    bad = {s.index for s in world.sites() if s.kind == "badcert"}
    async with b.store.pool.acquire() as conn:
        await seed_monitors(conn, account.id, [u for i, u in enumerate(urls) if i not in bad],
                            uptime=True, certificate=False, interval=INTERVAL_S)
        if bad:
            await seed_monitors(conn, certs_account.id, [urls[i] for i in sorted(bad)],
                                uptime=True, certificate=True, interval=INTERVAL_S)
