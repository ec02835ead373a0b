"""Giving freed memory back to the system after a burst of work.

A burst (10,000 heartbeat deadlines in a minute: their reads, transitions, outage rows and
webhook events) frees what it allocated, but glibc keeps the freed pages of its heap, so the
process's resident memory stays at the burst's high-water mark (docs/performance.md, "Memory
after the minute"). :class:`MemoryTrim` asks glibc to return them (``malloc_trim(0)``) when
the resident size has grown by :data:`GROWTH_BYTES` since the last time, at most every
:data:`EVERY_S` seconds, in a thread: the call walks the heap (18-95 ms on a 200 MiB one)
and releases the GIL, so the loop is not held. Where the C library is not glibc, nothing.

Pure decision: :func:`should_trim`. I/O at the edge: ``/proc/self/statm`` and the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable
from typing import Final

log = logging.getLogger(__name__)

EVERY_S: Final = 30.0
GROWTH_BYTES: Final = 8 * 1024 * 1024


def should_trim(rss: int, after_last: int | None) -> bool:
    """Trim when the resident size ``rss`` grew by at least GROWTH_BYTES over what it was
    after the last trim (``after_last``; None: none yet, measured from the first reading)."""
    return after_last is not None and rss - after_last >= GROWTH_BYTES


def resident_bytes() -> int | None:
    """This process's resident set size, from ``/proc/self/statm``; None where there is
    none (not Linux)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def glibc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)`` as a callable, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return lambda: fn(0)


class MemoryTrim:
    """A long-lived component: every EVERY_S seconds, trims when :func:`should_trim`."""

    def __init__(self, every_s: float = EVERY_S) -> None:
        self.every_s = every_s
        self.trims = 0

    async def run(self, stop: asyncio.Event) -> None:
        trim = glibc_trim()
        after_last = resident_bytes()
        if trim is None or after_last is None:
            await stop.wait()
            return
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.every_s)
                return
            rss = resident_bytes()
            if rss is None or not should_trim(rss, after_last):
                if rss is not None and rss < after_last:
                    after_last = rss
                continue
            await loop.run_in_executor(None, trim)
            self.trims += 1
            after_last = resident_bytes() or rss
            log.debug("memory trimmed: resident %d -> %d bytes", rss, after_last)
