"""The engine's background loops wait on a stop event, wake-up events and a timeout alike."""

from __future__ import annotations

import asyncio


async def wait_any(stop: asyncio.Event, *events: asyncio.Event, timeout: float | None) -> None:
    """Until ``stop`` or any of ``events`` is set, or ``timeout`` passes (None: no limit)."""
    waiters = [asyncio.ensure_future(e.wait()) for e in (stop, *events)]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
