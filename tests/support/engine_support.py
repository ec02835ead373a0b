"""Helpers for the engine's integration tests: monitors and checks made with direct SQL (the
engine's tests do not depend on the API's store), an engine run as a context manager, and
bounded waits on database conditions (never fixed sleeps)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from engine.daemon import build_kinds
from engine.db.store import Store
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings
from engine.scheduler.engine import Engine
from tests.support.wait import wait_until


def fast_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Real timelines 100x faster: a 30 s interval is 0.3 s, a 60 s threshold 0.6 s."""
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "allow_private_targets": True,
        "base_url": "http://127.0.0.1:8080",
        "time_scale": 0.01,
        "probe_timeout": 2.0,
        "result_flush_interval": 0.05,
        "resync_interval": 5.0,
        "rate_limit_per_second": 0,
    }
    values.update(overrides)
    return Settings(**values)


async def add_monitor(
    store: Store,
    account_id: int,
    url: str,
    *,
    interval: int = 30,
    threshold: int = 0,
    cert_interval: int = 30,
    expiry_days: int = 0,
    uptime: bool = True,
    certificate: bool = False,
    alias: str | None = None,
    notify: bool = True,
) -> tuple[int, int, int]:
    """A monitor with its two checks (disabled ones are ``paused``): (monitor, uptime, cert)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = str(parts.port) if parts.port else ""
    async with store.pool.acquire() as conn, conn.transaction():
        monitor_id = await conn.fetchval(
            "INSERT INTO monitors (account_id, identifier, alias, url, scheme, host, port)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
            account_id, secrets.token_urlsafe(9), alias or host, url, parts.scheme, host, port,
        )
        ids = []
        for kind, iv, th, on in (
            ("uptime", interval, threshold, uptime),
            ("certificate_health", cert_interval, expiry_days * 86400, certificate),
        ):
            ids.append(await conn.fetchval(
                "INSERT INTO checks (monitor_id, kind, interval_s, notification_threshold_s,"
                " is_enabled, status) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                monitor_id, kind, iv, th, on, "pending" if on else "paused",
            ))
            if notify:
                await conn.execute("SELECT pg_notify('upwatch_checks', $1)", str(ids[-1]))
    return monitor_id, ids[0], ids[1]


async def disable_check(store: Store, check_id: int) -> None:
    """What the API does on disable: paused, episode ended, open outage closed, notified."""
    async with store.pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "UPDATE checks SET is_enabled = false, status = 'paused', error = NULL,"
            " failing_since = NULL, detected_by = NULL, outage_id = NULL,"
            " incident_event_id = NULL, config_version = config_version + 1 WHERE id = $1",
            check_id,
        )
        await conn.execute(
            "UPDATE outages SET ended_at = now() WHERE check_id = $1 AND ended_at IS NULL",
            check_id,
        )
        await conn.execute("SELECT pg_notify('upwatch_checks', $1)", str(check_id))


async def enable_check(store: Store, check_id: int) -> None:
    async with store.pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "UPDATE checks SET is_enabled = true, status = 'pending', error = NULL,"
            " config_version = config_version + 1 WHERE id = $1",
            check_id,
        )
        await conn.execute("SELECT pg_notify('upwatch_checks', $1)", str(check_id))


async def delete_monitor(store: Store, monitor_id: int) -> None:
    async with store.pool.acquire() as conn, conn.transaction():
        ids = [r["id"] for r in await conn.fetch(
            "SELECT id FROM checks WHERE monitor_id = $1", monitor_id)]
        await conn.execute("DELETE FROM probe_results WHERE check_id = ANY($1::bigint[])", ids)
        await conn.execute("DELETE FROM monitors WHERE id = $1", monitor_id)
        for i in ids:
            await conn.execute("SELECT pg_notify('upwatch_checks', $1)", str(i))


async def check_row(store: Store, check_id: int) -> asyncpg.Record | None:
    async with store.pool.acquire() as conn:
        return await conn.fetchrow("SELECT * FROM checks WHERE id = $1", check_id)


async def fetch(store: Store, sql: str, *args: Any) -> list[asyncpg.Record]:
    async with store.pool.acquire() as conn:
        return await conn.fetch(sql, *args)


async def events_of(store: Store, check_id: int) -> list[asyncpg.Record]:
    """The webhook events of ``check_id``, oldest first."""
    return await fetch(store, "SELECT * FROM webhook_events WHERE check_id = $1 ORDER BY id",
                       check_id)


async def fetchval(store: Store, sql: str, *args: Any) -> Any:
    async with store.pool.acquire() as conn:
        return await conn.fetchval(sql, *args)


async def wait_status(
    store: Store, check_id: int, status: str, *, timeout: float = 10.0
) -> asyncpg.Record:
    async def probe() -> asyncpg.Record | None:
        row = await check_row(store, check_id)
        return row if row is not None and row["status"] == status else None

    return await wait_until(probe, timeout=timeout, what=f"check {check_id} to be {status}")


@contextlib.asynccontextmanager
async def running_engine(
    store: Store, settings: Settings, **kwargs: Any
) -> AsyncIterator[Engine]:
    """An engine running until the block ends; stops and drains it, failing if it died."""
    kwargs.setdefault("metrics", Metrics())
    kinds = build_kinds(settings, kwargs["metrics"], http_prober=kwargs.pop("http_prober", None),
                        cert_prober=kwargs.pop("cert_prober", None),
                        uptime_probers=kwargs.pop("uptime_probers", None), store=store)
    engine = Engine(store, settings, kinds=kinds, **kwargs)
    stop = asyncio.Event()
    task = asyncio.create_task(engine.run(stop))
    loaded = asyncio.ensure_future(engine.loaded.wait())
    done, _ = await asyncio.wait({task, loaded}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        loaded.cancel()
        await kinds.aclose()
        task.result()
        raise AssertionError("engine stopped before loading")
    try:
        yield engine
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, 15)
        finally:
            await kinds.aclose()


class DbProxy:
    """A TCP proxy in front of the test PostgreSQL (Unix socket) that a test can cut: every
    connection is reset and new ones are refused until :meth:`restore`. A real outage as
    the engine's asyncpg connections see it."""

    def __init__(self, dsn: str) -> None:
        from urllib.parse import parse_qs

        parts = urlsplit(dsn)
        self._socket = parse_qs(parts.query)["host"][0].rstrip("/") + "/.s.PGSQL.5432"
        self._database = parts.path.lstrip("/")
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.cut = False
        self.port = 0

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self._database}?sslmode=disable"

    async def start(self) -> DbProxy:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        self.sever()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def sever(self) -> None:
        """Reset every connection and refuse new ones."""
        self.cut = True
        for w in list(self._writers):
            w.transport.abort()

    def restore(self) -> None:
        self.cut = False

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self._socket)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.transport.abort()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self._writers -= {writer, up_writer}
