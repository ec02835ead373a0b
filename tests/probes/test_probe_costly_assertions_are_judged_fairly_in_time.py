"""Costly assertions (engine/probes/judges.py) are judged on worker threads: in turn between
owners, so one account's many costly monitors delay only its own, and by the probe's
deadline, so a probe never outlasts its timeout waiting for them."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from engine.probes.judges import FAILED, LATE, Judges
from tests.support.wait import wait_until


def _slow(seconds: float, verdict: str | None) -> str | None:
    time.sleep(seconds)
    return verdict


async def test_owners_take_turns_for_the_threads() -> None:
    loop = asyncio.get_running_loop()
    judges = Judges(1)
    answered: list[str | None] = []
    try:
        for i in range(6):  # one account's backlog...
            judges.submit(loop, 1, 30.0, _slow, (0.05, f"a{i}"), answered.append, lambda: True)
        await asyncio.sleep(0)
        judges.submit(loop, 2, 30.0, _slow, (0.0, "b0"), answered.append, lambda: True)
        await wait_until(lambda: len(answered) == 7, what="seven verdicts", timeout=10)
    finally:
        judges.close()
    # ...does not hold back the other account's job behind all of it: the next turn is b's.
    assert answered.index("b0") <= 2, answered
    assert [v for v in answered if v != "b0"] == [f"a{i}" for i in range(6)]


async def test_a_job_is_answered_by_its_deadline_and_only_once() -> None:
    loop = asyncio.get_running_loop()
    judges = Judges(1)
    answered: list[tuple[float, str | None]] = []
    started = time.monotonic()

    def record(verdict: str | None) -> None:
        answered.append((time.monotonic() - started, verdict))

    try:
        judges.submit(loop, 1, 0.1, _slow, (0.6, "too late"), record, lambda: True)
        # Queued behind it with a deadline that passes before a thread is free.
        judges.submit(loop, 2, 0.2, _slow, (0.0, "never run"), record, lambda: True)
        await wait_until(lambda: len(answered) == 2, what="both answered", timeout=5)
        assert [v for _, v in answered] == [LATE, LATE]
        assert answered[0][0] < 0.5 and answered[1][0] < 0.5, answered
        # The running job's verdict, when its thread ends, is dropped; the queue is empty.
        await wait_until(lambda: judges._busy == 0, what="the thread done", timeout=5)
        await asyncio.sleep(0.05)
        assert len(answered) == 2 and judges.queued == 0
    finally:
        judges.close()


async def test_an_unwanted_job_is_not_run_and_a_failure_is_said_in_words() -> None:
    loop = asyncio.get_running_loop()
    judges = Judges(1)
    ran: list[str] = []
    answered: list[str | None] = []

    def boom() -> str | None:
        raise RuntimeError("bug")

    def mark() -> str | None:
        ran.append(threading.current_thread().name)
        return None

    try:
        judges.submit(loop, 1, 5.0, _slow, (0.1, None), answered.append, lambda: True)
        judges.submit(loop, 1, 5.0, mark, (), answered.append, lambda: False)  # cancelled
        judges.submit(loop, 1, 5.0, boom, (), answered.append, lambda: True)
        await wait_until(lambda: len(answered) == 2, what="two verdicts", timeout=5)
        await asyncio.sleep(0.05)
    finally:
        judges.close()
    assert answered == [None, FAILED] and ran == []


async def test_verdicts_run_on_worker_threads_while_the_loop_turns() -> None:
    loop = asyncio.get_running_loop()
    judges = Judges(2)
    answered: list[str | None] = []
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while len(answered) < 2:
            ticks += 1
            await asyncio.sleep(0.01)

    try:
        for owner in (1, 2):
            judges.submit(loop, owner, 5.0, _slow, (0.3, "done"), answered.append,
                          lambda: True)
        await asyncio.wait_for(ticker(), 5)
    finally:
        judges.close()
    assert answered == ["done", "done"]
    assert ticks >= 10  # the loop kept turning: the two ran side by side, off it


def test_at_least_one_thread() -> None:
    with pytest.raises(ValueError):
        Judges(0)
