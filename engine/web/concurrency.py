"""At most ``UPWATCH_API_CONCURRENCY`` requests are handled at once; the rest wait their turn.

Why: ``upwatch run`` (role ``all``) serves the API and runs the check engine on ONE event
loop. Every request in progress adds callbacks to each turn of that loop (its database
replies, its JSON), so with 32 requests in progress every turn is long, and the scheduler,
which starts due probes once per turn, starts them late. With a few requests handled at once
the turns stay short and probes start on time while the API serves the same number of
requests a second (its work is CPU, one core's worth either way); a request over the limit
just waits a little in FIFO order.
``tests/hostile/test_hostile_api_load_keeps_schedule.py`` measures it.

A slot is held for the handler's work on the loop, never for a client's slowness nor a
worker thread: a handler waiting for the request body or for validation in a thread gives
its slot back meanwhile (:func:`slot_given_back`), and the response is written after the
slot is released. ``/healthz`` and ``/metrics`` never wait: liveness and
monitoring must answer even while the API is flooded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

NEVER_WAIT = frozenset({"/healthz", "/metrics"})


class _Slot:
    """One request's turn; released at most once, re-taken after a body wait."""

    __slots__ = ("_sem", "held")

    def __init__(self, sem: asyncio.Semaphore) -> None:
        self._sem = sem
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._sem.release()

    async def take(self) -> None:
        await self._sem.acquire()
        self.held = True


SLOT = web.RequestKey("api_slot", _Slot)


class ApiSlots:
    """The limit as an aiohttp middleware (``middleware``)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._sem = asyncio.Semaphore(limit)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in NEVER_WAIT:
            return await handler(request)
        await self._sem.acquire()
        slot = _Slot(self._sem)
        request[SLOT] = slot
        try:
            return await handler(request)
        finally:
            slot.release()


@contextlib.asynccontextmanager
async def body_wait(request: web.Request) -> AsyncIterator[None]:
    """Around reading the request body: the request's slot is given back while the body is
    still on its way (not when it has all arrived already), and taken again afterwards."""
    if request.content.is_eof():
        yield
        return
    async with slot_given_back(request):
        yield


@contextlib.asynccontextmanager
async def slot_given_back(request: web.Request) -> AsyncIterator[None]:
    """Around a wait that puts no work on the loop (a body on its way, validation in a worker
    thread): the request's slot is free for others meanwhile, and taken again afterwards."""
    slot = request.get(SLOT)
    if slot is None or not slot.held:
        yield
        return
    slot.release()
    try:
        yield
    finally:
        await slot.take()
