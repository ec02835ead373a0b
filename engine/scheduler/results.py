"""Probe results: a bounded in-memory buffer and the task that writes it in batches.

Probes hand their rows to :meth:`ResultsWriter.put` and go on; a writer task (``run``)
flushes every ``flush_interval`` or as soon as ``batch_rows`` rows wait, each flush one
transaction on a connection the writer holds (the store's results session): COPY of the rows,
from which the database derives ``probe_results`` and the hourly rollups, and of the checks
whose probe changed nothing but status/error/meta/last_check_at ("touches", which coalesce
per check: only the newest matters).

Bounds, so that memory never grows without limit:

- Database healthy but slower than the probes: ``put`` waits for space (back-pressure on the
  probes, which then start late and show it in the lateness metric).
- Database unavailable (the last write failed): probing goes on, writes are retried with
  back-off, and once the buffer is full the OLDEST rows are dropped, counted in
  ``upwatch_results_dropped_total`` and logged. Touches are kept (at most one per check).
- On stop: whatever waits is flushed within ``drain_timeout``; what cannot be written in
  that time is logged as lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, Protocol

from engine.kinds.base import ResultRow
from engine.kinds.scheduled import Touch
from engine.runtime.errors import DatabaseUnavailable, stray_cancel
from engine.runtime.metrics import Metrics

log = logging.getLogger(__name__)

_BACKOFF_FIRST = 0.2
_BACKOFF_MAX = 5.0
_GIVE_UP_AFTER = 3  # tries of a batch that fails for a reason other than an unreachable DB
_DROP_LOG_EVERY = 10.0
_STRAY_LIMIT = 5  # cancellations nobody asked for that the writer rides out


class ResultsSink(Protocol):
    async def write(self, rows: Any, touches: dict[int, Touch]) -> None: ...
    async def close(self) -> None: ...


class ResultsStore(Protocol):
    def results_session(self) -> ResultsSink: ...


class ResultsWriter:
    """See the module docstring. ``put`` and ``touch`` are for probe tasks; ``run`` is the
    writer component (the engine runs it).

    ``batch_rows`` defaults to 5,000: the fastest size measured (~28,000 rows/s with a
    rollup cell and a check update per row), and small enough that encoding one batch
    blocks the event loop for only a few tens of milliseconds.
    """

    def __init__(
        self,
        store: ResultsStore,
        *,
        metrics: Metrics,
        limit: int,
        flush_interval: float,
        batch_rows: int = 5_000,
        drain_timeout: float = 2.0,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._limit = limit
        # At most half the buffer in flight, so a full buffer always has queued rows to drop.
        self._batch = max(1, min(batch_rows, limit // 2))
        self._flush_interval = flush_interval
        self._drain_timeout = drain_timeout
        self._buf: deque[ResultRow] = deque()
        self._inflight = 0
        self._touches: dict[int, Touch] = {}
        self._wake = asyncio.Event()
        # True from a producer's wake-up until the writer takes it: at capacity the buffer
        # stays above a batch, and Event.set() (a Python call) would run for every row.
        self._woken = False
        self._space = asyncio.Event()
        self._space.set()
        self._outage = False
        self._failures = 0  # consecutive refusals of the current batch
        self._dropped_unlogged = 0
        self._last_drop_log = 0.0
        self.written = 0
        self.dropped = 0
        # Taken at the first write, closed by aclose (run does it on its way out).
        self._session: ResultsSink | None = None

    # -- producers ---------------------------------------------------------------------------

    @property
    def depth(self) -> int:
        """Rows waiting or being written."""
        return len(self._buf) + self._inflight

    @property
    def in_outage(self) -> bool:
        return self._outage

    async def put(self, row: ResultRow) -> None:
        """Queue one row; waits for space while the database is healthy but behind."""
        while len(self._buf) + self._inflight >= self._limit:
            if self._outage and self._buf:
                self._buf.popleft()
                self._note_drop(1)
                break
            self._space.clear()
            await self._space.wait()
        self._buf.append(row)
        if len(self._buf) >= self._batch and not self._woken:
            self._woken = True
            self._wake.set()

    def offer(self, row: ResultRow) -> bool:
        """Queue one row if there is room now; False (nothing queued) when :meth:`put` would
        have to wait or drop. Saves probes a coroutine per row in the common case."""
        buf = self._buf
        if len(buf) + self._inflight >= self._limit:
            return False
        buf.append(row)
        if len(buf) >= self._batch and not self._woken:
            self._woken = True
            self._wake.set()
        return True

    def touch(self, check_id: int, touch: Touch) -> None:
        """Record the newest status/error/meta/last_check_at of a check for the next flush."""
        self._touches[check_id] = touch

    def forget(self, check_id: int) -> None:
        """Drop a pending touch (the check was reconfigured; its version would not match)."""
        self._touches.pop(check_id, None)

    def _note_drop(self, n: int) -> None:
        self.dropped += n
        self._metrics.results_dropped.inc(n)
        self._dropped_unlogged += n
        if time.monotonic() - self._last_drop_log >= _DROP_LOG_EVERY:
            self._log_drops()

    def _log_drops(self) -> None:
        """One line for the drops since the last one (at most every ``_DROP_LOG_EVERY``, and
        when the outage ends), so the lines add up to the counter."""
        if self._dropped_unlogged:
            log.warning(
                "database unavailable and result buffer full (%d rows): dropped the %d oldest"
                " results", self._limit, self._dropped_unlogged,
                extra={"dropped": self._dropped_unlogged},
            )
            self._dropped_unlogged = 0
            self._last_drop_log = time.monotonic()

    # -- the writer ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Flush until ``stop``; then drain what is left within the drain timeout. A
        cancellation nobody asked for (a library's own, ``stray_cancel``) fails the batch in
        hand, which is put back, and the writer goes on: up to ``_STRAY_LIMIT`` times.
        The connection is given back on every way out; a failure is raised after that (no
        await while handling it: this module is compiled, engine/runtime/compiled.py)."""
        strays = 0
        failure: BaseException | None = None
        while True:
            try:
                await self._run(stop)
            except asyncio.CancelledError as exc:
                strays += 1
                if stray_cancel(exc) and strays <= _STRAY_LIMIT:
                    log.warning("results writer: a write was cancelled from inside; going on "
                                "with %d results held", len(self._buf), exc_info=True)
                    continue
                failure = exc
            except BaseException as exc:
                failure = exc
            break
        await self.aclose()
        if failure is not None:
            raise failure

    async def _run(self, stop: asyncio.Event) -> None:
        stop_waiter = asyncio.create_task(stop.wait())
        stop_waiter.add_done_callback(lambda _t: self._wake.set())
        backoff = 0.0
        try:
            while not stop.is_set():
                timeout = backoff if backoff else self._flush_interval
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout)
                except TimeoutError:
                    pass
                self._wake.clear()
                self._woken = False
                if stop.is_set():
                    break
                ok = await self.flush_once()
                if ok:
                    backoff = 0.0
                    # More than a batch waiting: go again at once.
                    if len(self._buf) >= self._batch:
                        self._wake.set()
                else:
                    backoff = min(_BACKOFF_MAX, backoff * 2 if backoff else _BACKOFF_FIRST)
        finally:
            stop_waiter.cancel()
        await self.drain()

    async def drain(self, timeout: float | None = None) -> bool:
        """Flush everything within ``timeout`` (default: the drain timeout); True if done."""
        deadline = time.monotonic() + (self._drain_timeout if timeout is None else timeout)
        pause = 0.05
        while self._buf or self._touches:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                ok = await asyncio.wait_for(self.flush_once(), left)
            except TimeoutError:
                break
            if not ok:
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, 0.5)
        if self._buf or self._touches:
            log.error(
                "stopping with %d results and %d check updates not written",
                len(self._buf), len(self._touches),
            )
            return False
        return True

    async def flush_once(self) -> bool:
        """Write one batch (rows up to ``batch_rows`` and every pending touch).

        True when it was written (or there was nothing); False when it failed and was put
        back (or, for a batch the database keeps refusing, given up on and counted dropped).
        """
        n = min(len(self._buf), self._batch)
        if n == 0 and not self._touches:
            self._metrics.result_buffer.set(0)
            return True
        buf = self._buf
        if n == len(buf):
            # The usual flush takes everything: one C-level copy, not a popleft per row.
            batch = list(buf)
            buf.clear()
        else:
            batch = [buf.popleft() for _ in range(n)]
        touches, self._touches = self._touches, {}
        self._inflight = n
        started = time.perf_counter()
        try:
            await self._write(batch, touches)
        except asyncio.CancelledError:
            self._put_back(batch, touches)
            raise
        except (DatabaseUnavailable, OSError, TimeoutError) as exc:
            self._put_back(batch, touches)
            if not self._outage:
                log.warning("cannot write results, will retry: %s", exc)
            self._outage = True
            self._failures = 0
            return False
        except Exception as exc:
            # A refusal (e.g. a check deleted between the join and the insert): retry a few
            # times, then give the batch up rather than wedge the writer.
            self._failures += 1
            if self._failures < _GIVE_UP_AFTER:
                log.warning("results batch refused, will retry: %r", exc)
                self._put_back(batch, touches)
            else:
                log.error("results batch refused %d times, dropping it: %r", self._failures, exc)
                self._failures = 0
                self._inflight = 0
                self._note_drop(len(batch))
                self._space.set()
            return False
        finally:
            self._metrics.result_buffer.set(len(self._buf) + self._inflight)
        self._inflight = 0
        self._failures = 0
        if self._outage:
            self._log_drops()
            log.info("results are being written again")
            self._outage = False
        self.written += n
        self._metrics.results_written.inc(n)
        self._metrics.batch_write.observe(time.perf_counter() - started)
        self._metrics.result_buffer.set(len(self._buf))
        self._space.set()
        return True

    async def _write(self, batch: list[ResultRow], touches: dict[int, Touch]) -> None:
        session = self._session
        if session is None:
            session = self._session = self._store.results_session()
        await session.write(batch, touches)

    async def aclose(self) -> None:
        """Give back the writer's connection (the pool cannot close while it is held)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _put_back(self, batch: list[ResultRow], touches: dict[int, Touch]) -> None:
        self._buf.extendleft(reversed(batch))
        self._inflight = 0
        for check_id, t in touches.items():
            self._touches.setdefault(check_id, t)  # a newer touch of the same check wins
        # Waiters re-check: in an outage they make room by dropping the oldest rows.
        self._space.set()
