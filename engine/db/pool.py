"""Connection pool: orjson codecs for json/jsonb, UTC sessions, and a reset on release only
for connections that took session state.

asyncpg's default release sends ``SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
RESET ALL`` after every use: one more database round trip for each store call, about as much
database work as a small read. The store leaves no session state on the connections it
releases: its transactions are ``async with conn.transaction()`` (asyncpg rolls back any
transaction left open before the reset hook runs, whatever the hook does), it sends no SET
and opens no cursors, and the two things that do outlive a transaction mark their
connection so that it still gets the full reset:

- LISTEN, through :meth:`UpwatchConnection.add_listener` (the engine's and deliverer's
  listeners hold a pooled connection for as long as they listen);
- session advisory locks, which the taker marks with :func:`mark_session_state` (the
  migration lock).

The store also marks every connection whose use ended in an exception (engine.db.base), so
that one left mid-protocol by an error is reset or terminated, never lent out as it is.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson
from asyncpg.pool import PoolConnectionProxy


class UpwatchConnection(asyncpg.Connection):
    """asyncpg's connection, remembering whether it holds session state (see the module)."""

    __slots__ = ("upwatch_session_state",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.upwatch_session_state = False

    async def add_listener(self, channel: str, callback: Any) -> None:
        self.upwatch_session_state = True
        await super().add_listener(channel, callback)


def mark_session_state(conn: Any) -> None:
    """Say that ``conn`` (a pooled connection, or its proxy) took session state that outlives
    a transaction, such as a session advisory lock: its release then runs the full reset.
    A connection made outside the pool is left alone (it is closed, not reused)."""
    raw = conn._con if isinstance(conn, PoolConnectionProxy) else conn
    # Not isinstance: asyncpg's connection metaclass answers True for any connection.
    if UpwatchConnection in type(raw).__mro__:
        raw.upwatch_session_state = True


async def _reset(conn: UpwatchConnection) -> None:
    """The pool's reset on release. asyncpg has already rolled back an open transaction and
    dropped listener callbacks; the reset query runs only where session state was taken."""
    if conn.upwatch_session_state:
        conn.upwatch_session_state = False
        await conn.execute(conn.get_reset_query())


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(
            typ,
            encoder=lambda v: orjson.dumps(v).decode(),
            decoder=orjson.loads,
            schema="pg_catalog",
        )


async def create_pool(
    dsn: str, *, min_size: int = 2, max_size: int = 20, **kw: Any
) -> asyncpg.Pool:
    kw.setdefault("reset", _reset)
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        connection_class=UpwatchConnection,
        server_settings={"timezone": "UTC", "application_name": "upwatch"},
        command_timeout=60,
        **kw,
    )
    assert pool is not None
    return pool


def is_closed(conn: Any) -> bool:
    """``conn.is_closed()``, True also for a pool proxy already detached from its connection.

    A connection the server terminated is handed back to the pool by asyncpg itself; the
    proxy the caller still holds then raises InterfaceError ("connection has been released
    back to the pool") instead of answering, which a LISTEN loop would log as a failure to
    connect rather than as the lost connection it is."""
    try:
        return bool(conn.is_closed())
    except asyncpg.InterfaceError:
        return True
