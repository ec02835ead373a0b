"""Validation off the event loop.

Validating a monitor is pure, CPU-bound work (URLs, and compiling regexes and JSONPaths); a
request carrying many patterns, or a monitor set of thousands of entries, would hold the
loop and stall every other account's requests. :func:`off_loop` runs such work in a worker
thread: one for single monitors and one for monitor sets, so that a large set delays no
single create. A thread gives the loop the interpreter back at least every switch interval
(5 ms), and RE2 compiles are bounded to a few milliseconds each
(engine/probes/patterns.py), so the loop waits at most that long at a time.

The work runs in a copy of the caller's context (contextvars, e.g. a pattern allowance).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

T = TypeVar("T")

_SINGLE: Final = ThreadPoolExecutor(max_workers=1, thread_name_prefix="upwatch-validate")
_SETS: Final = ThreadPoolExecutor(max_workers=1, thread_name_prefix="upwatch-validate-set")


async def off_loop(fn: Callable[[], T], *, monitor_set: bool = False) -> T:
    """``fn()`` in a validation thread; its result or its exception."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    pool = _SETS if monitor_set else _SINGLE
    return await loop.run_in_executor(pool, functools.partial(context.run, fn))
