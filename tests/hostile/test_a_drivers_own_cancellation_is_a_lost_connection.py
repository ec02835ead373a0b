"""A CancelledError that nobody asked for (asyncpg can let one out when the server cuts a
connection it is closing) reads as a lost connection; a real cancellation of the running
task is never swallowed."""

from __future__ import annotations

import asyncio

from engine.runtime.errors import stray_cancel


async def test_a_cancellation_nobody_asked_for_is_stray() -> None:
    async def raises_its_own() -> bool:
        try:
            raise asyncio.CancelledError
        except asyncio.CancelledError as exc:
            return stray_cancel(exc)

    assert await asyncio.create_task(raises_its_own())


async def test_a_cancelled_task_is_not() -> None:
    seen: list[bool] = []
    started = asyncio.Event()

    async def cancelled() -> None:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError as exc:
            seen.append(stray_cancel(exc))
            raise

    task = asyncio.create_task(cancelled())
    await started.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert seen == [False] and task.cancelled()


def test_other_errors_are_not_cancellations() -> None:
    assert not stray_cancel(TimeoutError())
