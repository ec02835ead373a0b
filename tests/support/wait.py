"""Bounded waits: a test waits for a condition it names, never for a fixed time."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def wait_until(
    condition: Callable[[], T | Awaitable[T]],
    *,
    what: str,
    timeout: float = 10.0,
    every: float = 0.02,
) -> T:
    """Call ``condition`` (a plain or an async function) every ``every`` seconds until it
    returns something truthy, and return that. After ``timeout`` seconds fail with an
    ``AssertionError`` naming ``what`` was awaited and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout} s waiting for {what}; last value {result!r}"
            )
        await asyncio.sleep(every)
