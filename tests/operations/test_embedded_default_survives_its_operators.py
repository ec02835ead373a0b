"""The README's embedded default, tried as an operator works: ``upwatch run`` in one terminal,
admin commands in another, and the database killed under it.

Every process here is real: ``python -m engine run`` with no database URL (its own
PostgreSQL in the data directory), ``python -m engine <command>`` beside it on the same
directory, ``kill -9`` of the postmaster and ``pg_ctl stop`` by hand.

The data directories live in fresh directories under the system temp dir, not ``tmp_path``:
as root the server runs as ``embedded_postgres``, and every pytest session that starts on
the machine makes ``/tmp/pytest-of-root`` 0700 again (see test_hostile_database_outage.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from engine.db.embedded import EmbeddedPostgres
from engine.db.embedded_lease import CONTROL_LOCK, EmbeddedLease
from tests.support.instances import Instance, RegionalTarget, WebhookReceiver, fetch
from tests.support.outage import OUTAGE_ENV, add_uptime_monitor, check_status, json_log
from tests.support.wait import wait_until

# The first start runs initdb with fsync on (the service's durable default): allow for it
# on a loaded machine.
START_TIMEOUT = 120.0
INTERVAL = 0.3  # the checks' interval under OUTAGE_ENV (time scale 0.01)


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def root() -> Any:
    path = Path(tempfile.mkdtemp(prefix="upwatch-embedded-"))
    yield path
    server = EmbeddedPostgres(path / "data" / "pg")
    if server.running():  # a failed test's leftover; a passing one stops it itself
        server.stop(mode="immediate")
    shutil.rmtree(path, ignore_errors=True)


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPWATCH_")}
    env["UPWATCH_DATA_DIR"] = str(data_dir)
    env["UPWATCH_ALLOW_PRIVATE_TARGETS"] = "true"
    return env


async def upwatch(data_dir: Path, *args: str, timeout: float = 120.0) -> Done:
    """``upwatch <args>`` as its own process on ``data_dir``'s embedded default. Async, so
    the test's own servers (targets, webhook receiver) keep answering meanwhile."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "engine", *args, env=_env(data_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


async def healthz(inst: Instance) -> int:
    async with aiohttp.ClientSession() as http, http.get(f"{inst.base_url}/healthz") as r:
        return r.status


@contextlib.asynccontextmanager
async def service(root: Path, env: dict[str, str] | None = None) -> AsyncIterator[Instance]:
    inst = Instance("", root, data_dir=root / "data", env=env or {})
    await inst.start(timeout=START_TIMEOUT)
    try:
        yield inst
    except BaseException:
        print(f"upwatch run ({inst.proc and inst.proc.returncode}) said:\n"
              + inst.log_text()[-6000:])
        raise
    finally:
        code = await inst.stop()
    assert code == 0, inst.log_text()[-3000:]


async def test_admin_commands_beside_the_service_leave_it_running(root: Path) -> None:
    data = root / "data"
    server = EmbeddedPostgres(data / "pg")
    async with service(root) as inst:
        postmaster = server.postmaster_pid()
        assert postmaster is not None and await healthz(inst) == 200

        created = await upwatch(data, "account", "create", "--name", "Ops", "--json")
        assert created.code == 0, created.stderr
        account_id = orjson.loads(created.stdout)["id"]
        rotated = await upwatch(data, "account", "rotate-token", str(account_id), "--json")
        assert rotated.code == 0, rotated.stderr
        token = orjson.loads(rotated.stdout)["token"]
        assert await healthz(inst) == 200
        for args in (["status"], ["status", "--json"], ["account", "list"], ["nodes"],
                     ["migrate"]):
            done = await upwatch(data, *args)
            assert done.code == 0, (args, done.stderr)
            # Right after the command: not stopped, and not stopped-and-restarted either.
            assert await healthz(inst) == 200, args
            assert server.postmaster_pid() == postmaster, args
        listed = await upwatch(data, "account", "list", "--json")
        assert "Ops" in listed.stdout

        # The new account's (rotated) token works against the running service.
        async with aiohttp.ClientSession(
            base_url=inst.base_url, headers={"Authorization": f"Bearer {token}"}
        ) as http:
            async with http.post("/webapi/monitors", json={"url": "http://127.0.0.1:9/"}) as r:
                assert r.status == 201, await r.text()
                monitor_id = (await r.json())["id"]
            async with http.get("/webapi/monitors") as r:
                assert r.status == 200
                body = await r.json()
        assert [m["id"] for m in body] == [monitor_id]

        # A second service on the same directory: refused at once, naming the first.
        assert inst.proc is not None
        started = time.monotonic()
        second = await upwatch(data, "run", timeout=60)
        assert second.code == 1
        assert f"pid {inst.proc.pid}" in second.stderr, second.stderr
        assert str(data) in second.stderr
        assert time.monotonic() - started < 30  # at once: no start-up, no database wait
        assert await healthz(inst) == 200 and server.postmaster_pid() == postmaster
        assert "starting it again" not in inst.log_text()
    # The service owns the server's life: a graceful stop stops it.
    assert not server.running()


async def test_a_service_started_while_a_command_holds_the_server_keeps_it(
    root: Path,
) -> None:
    data = root / "data"
    # The test process is the command: it takes the lease exactly as ``upwatch status`` does
    # (engine.daemon.database without service), and so starts the server itself...
    server = EmbeddedPostgres(data / "pg")
    command = EmbeddedLease(data, server, service=False)
    await asyncio.to_thread(command.acquire)
    assert server.started_here and server.running()
    postmaster = server.postmaster_pid()
    try:
        async with service(root) as inst:
            assert await healthz(inst) == 200
            # ... and leaves while the service runs: the server stays.
            await asyncio.to_thread(command.release)
            assert server.postmaster_pid() == postmaster
            assert await healthz(inst) == 200
            # A command arriving now, and leaving, changes nothing either.
            done = await upwatch(data, "status")
            assert done.code == 0, done.stderr
            assert server.postmaster_pid() == postmaster and await healthz(inst) == 200
    finally:
        await asyncio.to_thread(command.release)
    assert not server.running()

    # The service stopping while a command still uses the server: the server stays for the
    # command, and goes when the command, the last user, is done.
    command = EmbeddedLease(data, EmbeddedPostgres(data / "pg"), service=False)
    async with service(root):
        await asyncio.to_thread(command.acquire)
        assert not command.server.started_here
    assert server.running()
    done = await upwatch(data, "status")  # another command in between changes nothing
    assert done.code == 0, done.stderr
    assert server.running()
    await asyncio.to_thread(command.release)
    assert not server.running()

    # Alone, a command that starts the server stops it again when it is done.
    done = await upwatch(data, "account", "list")
    assert done.code == 0, done.stderr
    assert not server.running()

    # Overlapping commands, one of which starts the server: the last one out stops it.
    many = await asyncio.gather(*(upwatch(data, "status") for _ in range(4)))
    assert [d.code for d in many] == [0, 0, 0, 0], [d.stderr for d in many]
    assert not server.running()


async def _wait_back(inst: Instance, what: str) -> float:
    """Seconds until ``inst`` answers /healthz again."""

    async def up() -> bool:
        with contextlib.suppress(aiohttp.ClientError):
            return await healthz(inst) == 200
        return False

    start = time.monotonic()
    await wait_until(up, timeout=60, what=what, every=0.1)
    return time.monotonic() - start


async def _wait_away(inst: Instance) -> None:
    async def away() -> bool:
        with contextlib.suppress(aiohttp.ClientError):
            return await healthz(inst) == 503
        return False

    await wait_until(away, timeout=10, what="/healthz unavailable", every=0.02)


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_the_service_restarts_its_database_and_loses_nothing(root: Path) -> None:
    data = root / "data"
    server = EmbeddedPostgres(data / "pg")
    dsn = server.dsn()
    async with RegionalTarget() as flaky, RegionalTarget() as steady, \
            WebhookReceiver() as receiver, service(root, OUTAGE_ENV) as inst:
        made = await upwatch(data, "account", "create", "--name", "hooks", "--webhook-url",
                             receiver.url, "--json")
        assert made.code == 0, made.stderr
        token = orjson.loads(made.stdout)["token"]
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
            flaky_id = await add_uptime_monitor(http, inst, flaky.url("/"))
            steady_id = await add_uptime_monitor(http, inst, steady.url("/"))

            async def both_ok() -> bool:
                return (await check_status(dsn, flaky_id), await check_status(dsn, steady_id)) == \
                    ("ok", "ok")

            await wait_until(both_ok, timeout=30, what="both checks ok")
            started = time.time()

            # -- kill -9 of the postmaster while the site goes down ---------------------------
            # The restart takes about a second; to have the site's failure seen (and its
            # webhook fall due) while the database is away, the test holds the control lock
            # the restart waits for, as a command starting the server would, until the
            # service says it holds the downtime webhook in memory.
            postmaster = server.postmaster_pid()
            assert postmaster is not None
            hold = open(data / CONTROL_LOCK, "a+")
            fcntl.flock(hold, fcntl.LOCK_EX)
            try:
                flaky.failing_for = {"127.0.0.1"}
                killed_at = time.time()
                os.kill(postmaster, signal.SIGKILL)
                await _wait_away(inst)
                await wait_until(lambda: _logged(inst, "webhook held until the database is back"),
                                 timeout=30,
                                 what="the downtime webhook held while the database is away")
            finally:
                hold.close()
            released_at = time.time()
            back_after_kill = await _wait_back(inst, "the database back after kill -9")
            kill_outage = time.time() - killed_at
            assert server.postmaster_pid() not in (None, postmaster)

            async def is_down() -> bool:
                return await check_status(dsn, flaky_id) == "down"

            await wait_until(is_down, timeout=30, what="the flaky check down")
            await wait_until(lambda: _hits(receiver, 1), timeout=30, what="the downtime webhook")

            # -- pg_ctl stop by hand while the site comes back -----------------------------
            flaky.failing_for = set()
            stopped_at = time.time()
            await asyncio.to_thread(EmbeddedPostgres(data / "pg").stop)
            back_after_stop = await _wait_back(inst, "the database back after pg_ctl stop")
            stop_outage = time.time() - stopped_at

            async def is_ok() -> bool:
                return await check_status(dsn, flaky_id) == "ok"

            await wait_until(is_ok, timeout=30, what="the flaky check ok again")
            await wait_until(lambda: _hits(receiver, 2), timeout=30, what="the uptime webhook")

            # -- kill -9 once more, nothing held: how soon it is back on its own ------------
            postmaster = server.postmaster_pid()
            assert postmaster is not None
            os.kill(postmaster, signal.SIGKILL)
            await _wait_away(inst)
            back_alone = await _wait_back(inst, "the database back after a second kill -9")
            assert back_alone < 15
            ended = time.time()
            # Let a duplicate delivery, if any, arrive before counting.
            await wait_until(lambda: _all_delivered(dsn, flaky_id), timeout=30,
                             what="deliveries settled")
            assert inst.proc is not None and inst.proc.returncode is None

    # Every event written once and received once, in order.
    events = await fetch(dsn_after(server), "SELECT id, event, status FROM webhook_events "
                         "WHERE check_id = $1 ORDER BY id", flaky_id)
    assert [(e["event"], e["status"]) for e in events] == \
        [("downtime", "delivered"), ("uptime_restored", "delivered")]
    assert [h.headers["X-Service-Webhook"] for h in receiver.hits] == \
        [str(e["id"]) for e in events]
    # The outage began, and its webhook fell due, while the database was away.
    (outage,) = await fetch(dsn_after(server), "SELECT started_at FROM outages "
                            "WHERE check_id = $1", flaky_id)
    began = outage["started_at"].astimezone(UTC).timestamp()
    assert killed_at - 0.5 < began < released_at, (began - killed_at, released_at - killed_at)

    # The steady site's history has no hole: probing went on during both outages, and
    # what was probed then was written once the database was back.
    rows = await fetch(dsn_after(server), "SELECT at FROM probe_results WHERE check_id = $1 "
                       "AND at BETWEEN to_timestamp($2) AND to_timestamp($3) ORDER BY at",
                       steady_id, started, ended)
    stamps = [r["at"].astimezone(UTC).timestamp() for r in rows]
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    longest = max(gaps)
    outage = max(kill_outage, stop_outage)
    assert longest < outage + 5 * INTERVAL, (longest, outage)
    seen = [t for _, t in steady.seen if started < t < ended]
    assert len(stamps) >= len(seen) - 3, (len(stamps), len(seen))
    restarts = [e for e in json_log(inst) if "started again" in e.get("msg", "")]
    assert len(restarts) == 3
    errors = [e for e in json_log(inst) if e.get("level") in ("error", "critical")]
    # Whole and untruncated, with the warnings around them (what was recovering then).
    assert not errors, "\n".join(orjson.dumps(e).decode() for e in json_log(inst)
                                  if e.get("level") in ("warning", "error", "critical"))
    print(f"\nkill -9 with the restart held back: API answering {back_after_kill:.1f} s after "
          f"the hold ended ({kill_outage:.1f} s away); pg_ctl stop: {back_after_stop:.1f} s; "
          f"kill -9 alone: {back_alone:.1f} s; {len(stamps)} results of the steady site over "
          f"{ended - started:.1f} s, longest gap {longest:.2f} s; events "
          f"{[e['event'] for e in events]} each received once")


def dsn_after(server: EmbeddedPostgres) -> str:
    """The service stopped its server on the way out: start it again to read the rows."""
    if not server.running():
        server.start()
    return server.dsn()


async def _logged(inst: Instance, text: str) -> bool:
    return any(text in e.get("msg", "") for e in json_log(inst))


async def _hits(receiver: WebhookReceiver, n: int) -> bool:
    return len(receiver.hits) >= n


async def _all_delivered(dsn: str, check_id: int) -> bool:
    rows = await fetch(dsn, "SELECT count(*) AS n FROM webhook_events WHERE check_id = $1 "
                       "AND status <> 'delivered'", check_id)
    return int(rows[0]["n"]) == 0
