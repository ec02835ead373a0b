"""The store's shared core: the pool, transactions, notifications and error mapping.

Every area of the store (accounts, monitors, probing, webhooks, cluster) is a mixin over
:class:`StoreBase`; :class:`engine.db.store.Store` combines them. Rules that hold for all:

- SQL lives only in the ``engine.db`` package, as module-level named constants.
- Only public store methods open transactions (``async with self._tx() as conn``); private
  helpers take the connection they run on.
- A lost or refused database connection surfaces as :class:`DatabaseUnavailable`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from engine.db.pool import mark_session_state
from engine.runtime.errors import DatabaseUnavailable
from engine.runtime.secretbox import SecretBox, default_box

# Channels. LISTEN/NOTIFY only wakes loops; periodic polls keep them correct.
CHANNEL_CHECKS = "upwatch_checks"      # payload: check id (a config change to reload)
CHANNEL_WEBHOOKS = "upwatch_webhooks"  # payload: '' (events were queued)
CHANNEL_NODES = "upwatch_nodes"        # payload: node id (joined, stopping or gone)

# Errors that mean "the database is not there right now" rather than a bug.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ConnectionError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.TooManyConnectionsError,
    # A pooled connection the server cut while it sat idle (PostgreSQL stopping) can be
    # handed out before its socket's close is read: its first query then fails with "another
    # operation is in progress". The reset on release (below) terminates it.
    asyncpg.InternalClientError,
)


def _unavailable(exc: BaseException) -> DatabaseUnavailable:
    return DatabaseUnavailable(str(exc) or type(exc).__name__)


class _Acquired:
    """The pool's acquire context with database loss mapped to DatabaseUnavailable.

    A class rather than an ``asynccontextmanager`` generator: every store call goes through
    it, and the generator machinery cost more than the rest of a cached-plan read's Python.

    A use that ends in an exception gets the pool's full reset on release (see
    engine.db.pool): the connection may be left mid-protocol (a fatal error read before the
    server closed the socket, as when PostgreSQL stops), and lent out like that the next
    user would fail with "another operation is in progress". The reset query either finds
    the connection sound or fails, and asyncpg then terminates it. Clean uses skip it.
    """

    __slots__ = ("_conn", "_ctx")

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._ctx = pool.acquire()
        self._conn: asyncpg.Connection | None = None

    async def __aenter__(self) -> asyncpg.Connection:
        try:
            conn: asyncpg.Connection = await self._ctx.__aenter__()
        except UNAVAILABLE_ERRORS as exc:
            raise _unavailable(exc) from exc
        self._conn = conn
        return conn

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if exc is not None and self._conn is not None:
            mark_session_state(self._conn)
        try:
            await self._ctx.__aexit__(exc_type, exc, tb)
        except UNAVAILABLE_ERRORS as release_exc:
            raise _unavailable(release_exc) from release_exc
        except Exception:
            if exc is None:
                raise
            # The reset found the connection unusable and asyncpg terminated it: what the
            # caller must hear about is the use's own error, below.
        if exc is not None and isinstance(exc, UNAVAILABLE_ERRORS):
            raise _unavailable(exc) from exc


class StoreBase:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._secrets: SecretBox | None = None

    @property
    def secrets(self) -> SecretBox:
        """Encrypts and decrypts account secrets at rest (engine/runtime/secretbox.py): the
        box given to ``Store.connect``, else the environment's (:func:`default_box`)."""
        return self._secrets if self._secrets is not None else default_box()

    @property
    def pool(self) -> asyncpg.Pool:
        return self._pool

    def _conn(self) -> _Acquired:
        """``async with self._conn() as conn``: a pooled connection for the block; losing
        the database (on acquire, in the block or on release) raises DatabaseUnavailable."""
        return _Acquired(self._pool)

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[asyncpg.Connection]:
        async with self._conn() as conn, conn.transaction():
            yield conn

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        async with self._conn() as conn:
            return await conn.fetch(sql, *args)

    async def _fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        async with self._conn() as conn:
            return await conn.fetchrow(sql, *args)

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        async with self._conn() as conn:
            return await conn.fetchval(sql, *args)

    async def _execute(self, sql: str, *args: Any) -> str:
        async with self._conn() as conn:
            return await conn.execute(sql, *args)

    @staticmethod
    async def _notify(conn: asyncpg.Connection, channel: str, payload: str = "") -> None:
        """Queue a NOTIFY inside the caller's transaction (sent on commit)."""
        await conn.execute("SELECT pg_notify($1, $2)", channel, payload)

    async def ping(self) -> bool:
        """True when the database answers. Twice before saying no: after the server came
        back (a restart), the pool may lend one connection to the old server first, which
        fails and is dropped; the second try connects afresh."""
        for _ in range(2):
            try:
                return await self._fetchval("SELECT 1") == 1
            except DatabaseUnavailable:
                continue
        return False
