"""After a burst of work frees what it allocated, the process's resident memory goes back
down: the node's memory-trim component returns glibc's free pages (engine/runtime/memory.py),
without holding the loop."""

from __future__ import annotations

import asyncio
import ctypes.util
import time

import pytest

from engine.runtime.memory import GROWTH_BYTES, MemoryTrim, resident_bytes, should_trim
from tests.support.wait import wait_until

MIB = 1024 * 1024


def test_trims_only_after_growth_since_the_last_trim() -> None:
    assert not should_trim(500 * MIB, None)
    assert not should_trim(500 * MIB + GROWTH_BYTES - 1, 500 * MIB)
    assert should_trim(500 * MIB + GROWTH_BYTES, 500 * MIB)
    assert not should_trim(400 * MIB, 500 * MIB)


@pytest.mark.skipif(resident_bytes() is None or ctypes.util.find_library("c") is None,
                    reason="no /proc/self/statm or no C library to trim here")
async def test_resident_memory_falls_after_a_burst_is_freed() -> None:
    trim = MemoryTrim(every_s=0.05)
    stop = asyncio.Event()
    runner = asyncio.create_task(trim.run(stop))
    try:
        await asyncio.sleep(0.1)  # its first reading, before the burst
        # A burst: 180 MB in blocks past Python's small-object allocator, every tenth kept
        # (as a burst's lasting results are), so glibc cannot simply shrink its heap's top.
        burst = [bytearray(3000) for _ in range(60_000)]
        kept = burst[::10]
        peak = resident_bytes()
        assert peak is not None
        del burst
        gaps: list[float] = []
        last = time.monotonic()

        async def ticker() -> None:
            nonlocal last
            while True:
                await asyncio.sleep(0.005)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        ticks = asyncio.create_task(ticker())
        try:
            await wait_until(lambda: trim.trims >= 1, what="a trim", timeout=10)
        finally:
            ticks.cancel()
        after = resident_bytes()
        assert after is not None and after < peak - 100 * MIB, (peak, after)
        assert len(kept) == 6_000
        print(f"resident {peak / MIB:.0f} -> {after / MIB:.0f} MiB; longest loop gap "
              f"{max(gaps) * 1000:.1f} ms")
    finally:
        stop.set()
        await runner
