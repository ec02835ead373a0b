"""The process's supervisor: one stop event for every component; whichever way one ends
(an error, a cancellation nobody asked for, a plain return), all of them stop and drain, and
the exit status says whether it was a failure."""

from __future__ import annotations

import asyncio
import logging

import pytest

from engine.daemon import Supervisor


class Component:
    """Runs until the stop event, then takes ``drain`` seconds to stop; records both."""

    def __init__(self, drain: float = 0.0) -> None:
        self.drain = drain
        self.stopped = False
        self.cancelled = False

    async def __call__(self, stop: asyncio.Event) -> None:
        await stop.wait()
        try:
            await asyncio.sleep(self.drain)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.stopped = True


async def dies(stop: asyncio.Event) -> None:
    await asyncio.sleep(0)
    raise RuntimeError("broken")


async def cancelled_from_inside(stop: asyncio.Event) -> None:
    # What a library's own CancelledError does to the task it escapes from.
    await asyncio.sleep(0)
    raise asyncio.CancelledError


async def returns(stop: asyncio.Event) -> None:
    await asyncio.sleep(0)


@pytest.mark.parametrize(("culprit", "status", "words"), [
    (dies, 1, "component culprit died: RuntimeError('broken'); stopping"),
    (cancelled_from_inside, 1, "component culprit was cancelled from inside; stopping"),
    (returns, 0, "component culprit ended; stopping"),
])
async def test_one_component_ending_stops_and_drains_the_others(
    culprit: object, status: int, words: str, caplog: pytest.LogCaptureFixture
) -> None:
    other = Component()
    sup = Supervisor(drain_seconds=5)
    with caplog.at_level(logging.INFO, logger="engine.daemon"):
        code = await asyncio.wait_for(sup.run({"culprit": culprit, "other": other}), 10)
    assert code == status
    assert sup.stop.is_set()
    assert other.stopped and not other.cancelled
    assert words in caplog.messages


async def test_a_requested_stop_drains_and_cancels_what_overruns_the_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quick, slow = Component(), Component(drain=60)
    sup = Supervisor(drain_seconds=0.2)
    runner = asyncio.create_task(sup.run({"quick": quick, "slow": slow}))
    await asyncio.sleep(0)
    sup.stop.set()
    with caplog.at_level(logging.INFO, logger="engine.daemon"):
        code = await asyncio.wait_for(runner, 10)
    assert quick.stopped and slow.cancelled and not slow.stopped
    assert "component slow did not drain in time; cancelling" in caplog.messages
    # Cut at the limit is what the limit is for: a requested stop still exits 0.
    assert code == 0
    # Cut at the limit, not before (the loop's timers fire to the millisecond).
    assert sup.drained_in is not None and 0.19 <= sup.drained_in < 5
