"""Validation off the event loop.

Validating a monitor is pure, CPU-bound work (URLs, and compiling regexes and JSONPaths); a
request carrying many patterns, or a monitor set of thousands of entries, would hold the
loop and stall every other account's requests. :func:`off_loop` runs such work in a worker
thread: one for single monitors and one for monitor sets, so that a large set delays no
single create. A thread gives the loop the interpreter back at least every switch interval
(5 ms), and RE2 compiles are bounded to a few milliseconds each
(engine/probes/patterns.py), so the loop waits at most that long at a time.

The work runs in a copy of the caller's context (contextvars, e.g. a pattern allowance).

A plain create is not such work: a small body whose patterns are all in the cache validates
in well under a millisecond. :func:`validated` runs it on the loop, with no pattern compiled
there (:func:`engine.probes.patterns.cached_only`), and hands the rest to the thread. So a
create never waits for the GIL behind a busy engine only to do a few microseconds of work.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

from engine.probes import patterns

T = TypeVar("T")

_SINGLE: Final = ThreadPoolExecutor(max_workers=1, thread_name_prefix="upwatch-validate")
_SETS: Final = ThreadPoolExecutor(max_workers=1, thread_name_prefix="upwatch-validate-set")


async def off_loop(fn: Callable[[], T], *, monitor_set: bool = False) -> T:
    """``fn()`` in a validation thread; its result or its exception."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    pool = _SETS if monitor_set else _SINGLE
    return await loop.run_in_executor(pool, functools.partial(context.run, fn))


# A body at most this long (bytes) is validated on the loop when it compiles nothing new.
SMALL_BODY: Final = 4096


async def validated(
    fn: Callable[[], T], *, small: bool,
    waiting: Callable[[], contextlib.AbstractAsyncContextManager[None]] = contextlib.nullcontext,
) -> T:
    """``fn()`` (a pure validation, safe to run twice) on the loop when the body is
    ``small`` and no new pattern needs compiling; otherwise in the validation thread, inside
    ``waiting()`` (e.g. giving an API slot back meanwhile)."""
    if small:
        try:
            with patterns.cached_only():
                return fn()
        except patterns.CompileWanted:
            pass
    async with waiting():
        return await off_loop(fn)
