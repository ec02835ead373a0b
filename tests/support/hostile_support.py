"""Helpers for the hostile-world tests (``test_hostile_*``): many monitors inserted with one
round of SQL, a fleet of hostile servers in a child process, and percentiles.

The fleet runs in its own process (``python -m tests.support.hostile_support HOST...``) so that the
work of serving 1,000 hostile targets (endless bodies, a megabyte of headers, slowloris) is
not done on the event loop whose scheduling a test measures: in the world, hostile servers
are somebody else's machines. It serves, on each host, one :class:`tests.support.targets.HttpTarget`
(every hostile path of its table) and one in ``garbage`` mode (bytes that are not TLS), prints
``{"host": {"http": port, "garbage": port}, ...}`` as one JSON line once listening, and exits
when its stdin closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
import sys
from collections.abc import AsyncIterator, Sequence
from urllib.parse import urlsplit

import asyncpg

from tests.support.targets import HttpTarget

SQL_MONITORS = """
INSERT INTO monitors (account_id, identifier, alias, url, scheme, host, port)
SELECT $1, t.identifier, t.host, t.url, t.scheme, t.host, t.port
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
     WITH ORDINALITY AS t(identifier, url, scheme, host, port, n)
ORDER BY t.n
RETURNING id
"""
SQL_CHECKS = """
INSERT INTO checks (monitor_id, kind, interval_s, notification_threshold_s, is_enabled, status)
SELECT m.id, k.kind, $2, $3, k.kind = 'uptime',
       CASE WHEN k.kind = 'uptime' THEN 'pending' ELSE 'paused' END
FROM unnest($1::bigint[]) WITH ORDINALITY AS m(id, n)
CROSS JOIN (VALUES ('uptime'), ('certificate_health')) AS k(kind)
ORDER BY m.n, k.kind DESC
RETURNING id, kind
"""
SQL_NOTIFY = "SELECT pg_notify('upwatch_checks', id::text) FROM unnest($1::bigint[]) AS id"


async def add_monitors(
    conn: asyncpg.Connection,
    account_id: int,
    urls: Sequence[str],
    *,
    interval: int = 30,
    threshold: int = 0,
    notify: bool = False,
) -> list[int]:
    """Monitors for ``urls`` (uptime check enabled, certificate check paused) in one
    transaction; returns the uptime check ids in the order of ``urls``. ``notify``: tell a
    running engine (as the API does)."""
    idents, schemes, hosts, ports = [], [], [], []
    for url in urls:
        parts = urlsplit(url)
        idents.append(secrets.token_urlsafe(9))
        schemes.append(parts.scheme)
        hosts.append(parts.hostname or "")
        ports.append(str(parts.port) if parts.port else "")
    async with conn.transaction():
        monitor_ids = [r["id"] for r in await conn.fetch(
            SQL_MONITORS, account_id, idents, list(urls), schemes, hosts, ports)]
        rows = await conn.fetch(SQL_CHECKS, monitor_ids, interval, threshold)
        uptime = [r["id"] for r in rows if r["kind"] == "uptime"]
        if notify:
            await conn.execute(SQL_NOTIFY, uptime)
    return uptime


def percentile(samples: Sequence[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (0 < p <= 100)."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


class Fleet:
    """The child process serving the hostile targets; ``ports[host]["http" | "garbage"]``."""

    def __init__(self, hosts: Sequence[str]) -> None:
        self.hosts = list(hosts)
        self.ports: dict[str, dict[str, int]] = {}
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self, timeout: float = 20.0) -> Fleet:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.hostile_support", *self.hosts,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        assert self._proc.stdout is not None
        line = await asyncio.wait_for(self._proc.stdout.readline(), timeout)
        if not line:
            raise AssertionError("the hostile fleet did not start")
        self.ports = json.loads(line)
        return self

    async def stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@contextlib.asynccontextmanager
async def hostile_fleet(hosts: Sequence[str]) -> AsyncIterator[Fleet]:
    fleet = Fleet(hosts)
    try:
        yield await fleet.start()
    finally:
        await fleet.stop()


async def _serve(hosts: list[str]) -> None:
    targets: list[HttpTarget] = []
    ports: dict[str, dict[str, int]] = {}
    for host in hosts:
        http = await HttpTarget(host=host).start()
        garbage = HttpTarget(host=host)
        garbage.mode = "garbage"
        await garbage.start()
        targets += [http, garbage]
        ports[host] = {"http": http.port, "garbage": garbage.port}
    sys.stdout.write(json.dumps(ports) + "\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    # Until the parent closes our stdin (or goes away).
    await loop.run_in_executor(None, sys.stdin.buffer.read)
    await asyncio.gather(*(t.stop() for t in targets), return_exceptions=True)


if __name__ == "__main__":
    import uvloop

    uvloop.run(_serve(sys.argv[1:]))
