"""Costly assertions judged off the event loop, fairly between accounts, within the probe's
deadline.

A probe whose assertions may cost (a regex search, a large json body:
:meth:`engine.probes.request.RequestSpec.off_loop`) hands their verdict to :class:`Judges`,
which runs it on one of a few worker threads (CPU work: RE2 lets go of the GIL while it
searches, and Python code holding it gives it up every switch interval).

- Jobs wait in one queue per owner (the monitor's account); a free thread takes the oldest
  job of the next owner in turn, so one account's many costly monitors delay only its own.
- A job is answered by its deadline (the probe's): one still queued or running then gets
  :data:`LATE` and its thread's verdict, if any, is dropped. So a probe never outlasts its
  timeout for its assertions, and the threads' backlog never outgrows what the deadlines let
  in.

All bookkeeping runs on the loop; only the verdict runs on a thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

log = logging.getLogger(__name__)

LATE: Final = ("assertions not judged before the probe's deadline (costly assertions of"
               " this service are queued)")
FAILED: Final = "assertions failed: internal error"


class _Job:
    __slots__ = ("args", "done", "fn", "timer", "wanted")

    def __init__(self, fn: Callable[..., str | None], args: tuple[Any, ...],
                 done: Callable[[str | None], None], wanted: Callable[[], bool]) -> None:
        self.fn = fn
        self.args = args
        self.done: Callable[[str | None], None] | None = done
        self.wanted = wanted
        self.timer: asyncio.TimerHandle | None = None

    def answer(self, verdict: str | None) -> None:
        """Call back once; later answers (a verdict after the deadline) are dropped."""
        done = self.done
        if done is not None:
            self.drop()
            done(verdict)

    def drop(self) -> None:
        """Never call back."""
        self.done = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class Judges:
    """Worker threads for costly assertions, shared fairly by owners (see the module)."""

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._busy = 0
        self._queues: dict[int, deque[_Job]] = {}
        self._turn: deque[int] = deque()  # owners with queued jobs, in turn order

    @property
    def queued(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def submit(
        self,
        loop: asyncio.AbstractEventLoop,
        owner: int,
        timeout: float,
        fn: Callable[..., str | None],
        args: tuple[Any, ...],
        done: Callable[[str | None], None],
        wanted: Callable[[], bool],
    ) -> None:
        """Judge ``fn(*args)`` for ``owner``; ``done(verdict)`` is called once on the loop,
        never from inside this call: with the verdict, :data:`FAILED` if ``fn`` raised, or
        :data:`LATE` after ``timeout`` seconds. ``wanted()`` False: the caller no longer
        wants it (a cancelled probe), and a queued job is dropped without a call."""
        job = _Job(fn, args, done, wanted)
        job.timer = loop.call_later(max(0.0, timeout), job.answer, LATE)
        queue = self._queues.get(owner)
        if queue is None:
            queue = self._queues[owner] = deque()
            self._turn.append(owner)
        queue.append(job)
        loop.call_soon(self._dispatch, loop)

    def _dispatch(self, loop: asyncio.AbstractEventLoop) -> None:
        while self._busy < self.threads and self._turn:
            owner = self._turn.popleft()
            queue = self._queues[owner]
            job = queue.popleft()
            if queue:
                self._turn.append(owner)
            else:
                del self._queues[owner]
            if job.done is None:
                continue  # answered LATE while queued
            if not job.wanted():
                job.drop()
                continue
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="upwatch-judge")
            self._busy += 1
            future = loop.run_in_executor(self._pool, job.fn, *job.args)
            future.add_done_callback(functools.partial(self._finished, loop, job))

    def _finished(self, loop: asyncio.AbstractEventLoop, job: _Job,
                  future: asyncio.Future[str | None]) -> None:
        self._busy -= 1
        try:
            verdict = future.result()
        except asyncio.CancelledError:  # close() dropped it before a thread took it
            verdict = LATE
        except Exception:
            log.exception("assertions failed unexpectedly")
            verdict = FAILED
        job.answer(verdict)
        self._dispatch(loop)

    def close(self) -> None:
        """Let the threads go once their work is done (a later submit makes new ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
