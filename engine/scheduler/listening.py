"""A LISTEN connection held until stop, and replaced when it is lost (:func:`hold`).

Not compiled (engine/runtime/compiled.py): leaving the connection's ``async with`` awaits
its exit, on an exception too, and a compiled coroutine must never await while it handles
an exception.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from engine.runtime.errors import DatabaseUnavailable
from engine.scheduler.waiting import wait_any

log = logging.getLogger(__name__)

LISTEN_PING = 15.0  # seconds between liveness round trips on the LISTEN connection


class Held(Protocol):
    """A held LISTEN connection (:class:`engine.db.listen.Listener`)."""

    lost: asyncio.Event

    async def alive(self) -> bool: ...


async def hold(
    listen: Callable[[], AbstractAsyncContextManager[Held]],
    connected: Callable[[], None],
    stop: asyncio.Event,
    what: str,
) -> None:
    """Hold the connection ``listen()`` opens until ``stop``; ``what`` names what it hears
    in log lines. ``connected()`` runs after every (re)connection, since notifications sent
    while not listening are lost. A connection that is closed or stops answering (a round
    trip every ``LISTEN_PING`` s) is replaced, after a backoff while none can be opened."""
    backoff = 0.5
    while not stop.is_set():
        try:
            async with listen() as listener:
                backoff = 0.5
                connected()
                while not stop.is_set() and not listener.lost.is_set():
                    await wait_any(stop, listener.lost, timeout=LISTEN_PING)
                    if not stop.is_set() and not listener.lost.is_set():
                        await listener.alive()
            if not stop.is_set():
                log.warning("lost the LISTEN connection for %s; reconnecting", what)
        except DatabaseUnavailable as exc:
            log.warning("cannot LISTEN for %s, retrying: %s", what, exc)
        except Exception:
            log.exception("LISTEN connection for %s failed; retrying", what)
        await wait_any(stop, timeout=backoff)
        backoff = min(backoff * 2, 10.0)
