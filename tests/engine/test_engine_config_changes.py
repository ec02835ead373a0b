"""The engine follows the API: disable, enable, delete (also while a probe is in flight),
configuration changes by NOTIFY, a periodic resync for what NOTIFY missed, and a lost
LISTEN connection."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from engine.db.store import Store
from engine.scheduler.engine import Engine
from tests.support.engine_support import (
    add_monitor,
    check_row,
    delete_monitor,
    disable_check,
    enable_check,
    fast_settings,
    fetch,
    fetchval,
    running_engine,
    wait_status,
)
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until


def hits(site: HttpTarget, path: str) -> int:
    return sum(1 for r in site.requests if r.target == path)


async def wait_hits(site: HttpTarget, path: str, n: int, timeout: float = 10.0) -> None:
    await wait_until(lambda: hits(site, path) >= n, timeout=timeout,
                     what=f"{n} requests to {path}")


async def wait_gone(engine: Engine, check_id: int) -> None:
    await wait_until(
        lambda: engine.check(check_id) is None and engine.in_flight == 0,
        what=f"check {check_id} dropped and nothing in flight")


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_disable_during_a_probe_wins_and_enable_probes_again_soon(
    store: Store, account: tuple[Any, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path)
    async with HttpTarget() as site, HttpTarget() as marker:
        _, check_id, _ = await add_monitor(store, acc.id, site.url("/a"))
        await add_monitor(store, acc.id, marker.url("/m"))
        async with running_engine(store, settings) as engine:
            await wait_status(store, check_id, "ok")
            # The next probe hangs in flight for 0.5 s; disable meanwhile.
            site.delay = 0.5
            seen = hits(site, "/a")
            await wait_hits(site, "/a", seen + 1)
            await disable_check(store, check_id)
            await wait_gone(engine, check_id)
            row = await check_row(store, check_id)
            assert row["status"] == "paused" and row["is_enabled"] is False
            # While paused: no requests, though the engine keeps probing the rest.
            after = hits(site, "/a")
            await wait_hits(marker, "/m", hits(marker, "/m") + 4)
            assert hits(site, "/a") == after
            assert (await check_row(store, check_id))["status"] == "paused"

            site.delay = 0.0
            enabled_at = time.monotonic()
            await enable_check(store, check_id)
            await wait_status(store, check_id, "ok")
            assert time.monotonic() - enabled_at < 3.0  # "within a few seconds"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_delete_during_a_probe_leaves_nothing_behind(
    store: Store, account: tuple[Any, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path)
    async with HttpTarget() as site:
        monitor_id, check_id, _ = await add_monitor(store, acc.id, site.url("/"))
        async with running_engine(store, settings) as engine:
            await wait_status(store, check_id, "ok")
            site.status = 500
            site.delay = 0.4
            seen = len(site.requests)
            await wait_until(lambda: len(site.requests) > seen, what="a probe in flight")
            await delete_monitor(store, monitor_id)
            await wait_gone(engine, check_id)
            # Let the writer flush whatever it holds.
            assert await engine.results.drain(2.0)
        assert await check_row(store, check_id) is None
        n = await fetchval(store, "SELECT count(*) FROM probe_results WHERE check_id = $1",
                           check_id)
        assert n == 0
        assert await fetch(store, "SELECT * FROM webhook_events WHERE check_id = $1",
                           check_id) == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_configuration_changes_arrive_by_notify(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, resync_interval=3600)  # only NOTIFY can tell it
    async with HttpTarget() as site:
        async with running_engine(store, settings) as engine:
            # A new monitor is probed within a second or two.
            created = time.monotonic()
            monitor_id, check_id, _ = await add_monitor(store, acc.id, site.url("/old"))
            await wait_status(store, check_id, "ok")
            assert time.monotonic() - created < 3.0
            # A new path and interval reach the engine within about a second.
            async with store.pool.acquire() as conn:
                await conn.execute(
                    "UPDATE monitors SET url = $2 WHERE id = $1", monitor_id, site.url("/new"))
                await conn.execute(
                    "UPDATE checks SET interval_s = 60, config_version = config_version + 1"
                    " WHERE id = $1", check_id)
                await conn.execute("SELECT pg_notify('upwatch_checks', $1)", str(check_id))
            changed = time.monotonic()

            async def reloaded() -> bool:
                c = engine.check(check_id)
                return c is not None and c.interval_s == 60 and c.url.endswith("/new")

            await wait_until(reloaded, timeout=2.0, what="the reload")
            assert time.monotonic() - changed < 1.5  # "within about a second"
            await wait_hits(site, "/new", 2)


async def test_resync_catches_changes_without_notify(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, resync_interval=0.3)
    async with HttpTarget() as site:
        async with running_engine(store, settings) as engine:
            monitor_id, check_id, _ = await add_monitor(
                store, acc.id, site.url("/"), notify=False)
            await wait_status(store, check_id, "ok", timeout=5)
            async with store.pool.acquire() as conn:
                await conn.execute("DELETE FROM monitors WHERE id = $1", monitor_id)
            await wait_gone(engine, check_id)


async def test_lost_listen_connection_is_reestablished(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, resync_interval=3600)
    async with HttpTarget() as site:
        async with running_engine(store, settings):
            async def listener_pid() -> Any:
                # This database's only: the other test workers' share the server.
                return await fetchval(
                    store, "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"
                           " AND datname = current_database()")

            pid = await wait_until(listener_pid, what="the LISTEN connection")
            await fetchval(store, "SELECT pg_terminate_backend($1)", pid)
            await wait_until(
                lambda: _other(listener_pid, pid), what="a new LISTEN connection")
            # Changes made now still arrive by NOTIFY (or the resync after reconnecting).
            _, check_id, _ = await add_monitor(store, acc.id, site.url("/"))
            await wait_status(store, check_id, "ok", timeout=5)


async def _other(fn: Any, pid: int) -> bool:
    now = await fn()
    return now is not None and now != pid
