"""A held LISTEN connection that notices when it is lost (:func:`listening`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from engine.db.base import UNAVAILABLE_ERRORS
from engine.db.pool import is_closed

SQL_PING = "SELECT 1"


class Listener:
    """A held LISTEN connection: ``lost`` is set once it is closed or stops answering."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self.lost = asyncio.Event()
        self._on_term = lambda _c: self.lost.set()
        conn.add_termination_listener(self._on_term)

    async def alive(self, timeout: float = 5.0) -> bool:
        """Round trip on the connection; False (and ``lost`` set) when it does not answer.

        A dead peer without a TCP reset is only noticed this way."""
        if self.lost.is_set() or is_closed(self._conn):
            self.lost.set()
            return False
        try:
            await self._conn.fetchval(SQL_PING, timeout=timeout)
            return True
        except (*UNAVAILABLE_ERRORS, asyncpg.PostgresError, TimeoutError):
            self.lost.set()
            return False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.remove_termination_listener(self._on_term)


@contextlib.asynccontextmanager
async def listening(
    acquired: contextlib.AbstractAsyncContextManager[Any], channel: str, callback: Any
) -> AsyncIterator[Listener]:
    """LISTEN on ``channel`` on the connection ``acquired`` gives, for the block."""
    async with acquired as conn:
        listener = Listener(conn)
        await conn.add_listener(channel, callback)
        try:
            yield listener
        finally:
            listener.close()
            if not is_closed(conn):
                with contextlib.suppress(*UNAVAILABLE_ERRORS, asyncpg.PostgresError):
                    await conn.remove_listener(channel, callback)
