"""The outbox runner: claims due rows from one :class:`engine.db.outbox.OutboxQueue` and
hands each to a :class:`Sender`, with the webhook's retry policy for every kind.

Contract (decisions.md "Webhooks", shared by notifications):

- A try that the sender does not call delivered is retried with
  :mod:`engine.delivery.policy` until 24 h (x time scale) after the row was queued; then the
  row is ``failed`` and kept.
- Order and one-sender-per-try come from the queue's claim; several runners, in one process
  or many, can run against one database.
- A dead or slow target costs at most one slot per try for at most the sender's timeout. One
  share (an account) may use three quarters of the slots while its target answers, and an
  eighth once a try of it got no answer at all, so the others always find free slots;
  nothing here blocks the event loop. The share is work-conserving for a target that
  answers quickly: it may also take the slots no other share has a due row for; every claim
  serves the other shares first.
- Results of finished tries are written in one batch, in the claim's transaction and before
  its queries, so the next row of an order key only becomes claimable once the previous
  one's result is written.

Wake-ups: LISTEN on the queue's channel, a timer at each retry this runner scheduled, the end
of every try, and a periodic poll for everything else (retries scheduled by another
instance, a lost notification, a lease that ran out).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

import asyncpg

from engine.db.outbox import ExpiredEvent, TryResult
from engine.db.pool import is_closed
from engine.delivery import policy
from engine.runtime.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

# "The database is not there right now": DatabaseUnavailable from the store, plus what asyncpg
# raises when a connection is lost in the middle of a query (the store maps only acquiring).
DB_ERRORS: tuple[type[BaseException], ...] = (
    DatabaseUnavailable,
    OSError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
)

# The lease covers one try (bounded by the sender's timeout) plus recording its result.
LEASE_MARGIN = 5.0
# While tries are in flight, a wake-up waits this long for more of them to finish, so their
# results are written and their slots refilled in one round trip instead of one each.
BATCH_WINDOW = 0.005
# A target whose last try succeeded within this long (and none of whose tries in flight has
# taken longer) may use slots beyond its share.
QUICK_ANSWER = 1.0

RESULT_DELIVERED = "delivered"
RESULT_GAVE_UP = "gave_up"
RESULT_EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one try came to. ``status_code`` is None when no response arrived; ``answered``
    (default: a status code came back) says whether the target answered at all, which keeps
    or takes away its full share of slots."""

    result: str
    status_code: int | None = None
    error: str | None = None
    answered: bool | None = None

    @property
    def delivered(self) -> bool:
        return self.result == RESULT_DELIVERED

    @property
    def got_answer(self) -> bool:
        return self.status_code is not None if self.answered is None else self.answered


class OutboxItem(Protocol):
    """What the runner reads of a claimed row."""

    @property
    def id(self) -> int: ...
    @property
    def tries(self) -> int: ...
    @property
    def share(self) -> int: ...
    @property
    def monitor_id(self) -> int: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def claimed_at(self) -> datetime: ...


Item = TypeVar("Item", bound=OutboxItem)
Item_contra = TypeVar("Item_contra", bound=OutboxItem, contravariant=True)


class Sender(Protocol[Item_contra]):
    """One kind of message's delivery: one try, never raising (but for cancellation)."""

    # In words for log lines: "webhook", "notification".
    noun: str

    def ready(self, item: Item_contra) -> bool:
        """False when the target vanished between claim and send: the row is handed back
        with its try undone."""
        ...

    async def send(self, item: Item_contra) -> Attempt: ...

    def members(self, item: Item_contra) -> Sequence[tuple[int, int]]:
        """(id, try number) of every row this try settles: the item's own, or a group's."""
        ...


@dataclass(slots=True)
class RunnerMetrics:
    """The metrics a runner keeps: a Counter labelled by ``result`` and two Gauges."""

    deliveries: Any
    depth: Any
    oldest: Any


class Queue(Protocol[Item]):
    """What the runner calls of its queue: an :class:`engine.db.outbox.OutboxQueue`."""

    async def claim(
        self, limit: int, lease_seconds: float, *, per_share_limit: int | None,
        in_flight: Mapping[int, int], share_limits: Mapping[int, int],
        may_exceed: Collection[int], results: Sequence[TryResult],
    ) -> list[Item]: ...

    async def record_tries(self, results: Sequence[TryResult]) -> None: ...

    async def release(
        self, row_id: int, tries: int, *, undo_try: bool, error: str | None = None
    ) -> bool: ...

    async def expire(self, max_age_seconds: float) -> list[ExpiredEvent]: ...

    async def stats(self) -> tuple[int, float]: ...

    def held_for(self) -> float | None: ...

    def listen(
        self, on_notify: Callable[[], None]
    ) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]: ...


class OutboxRunner(Generic[Item]):
    """Delivers one queue's rows until stopped.

    ``run(stop)`` returns once ``stop`` is set and in-flight tries have finished or, after
    ``drain_timeout`` seconds, been handed back to the queue (counted as made, due at once).
    """

    def __init__(
        self,
        queue: Queue[Item],
        sender: Sender[Item],
        *,
        concurrency: int,
        timeout: float,
        time_scale: float,
        metrics: RunnerMetrics,
        drain_timeout: float = 5.0,
        quick_answer: float = QUICK_ANSWER,
    ) -> None:
        self._queue = queue
        self._sender = sender
        self._noun = sender.noun
        self._metrics = metrics
        self._drain_timeout = drain_timeout
        self._concurrency = concurrency
        self._time_scale = time_scale
        # Slots per share: a healthy target may use all but a quarter of them; one whose last
        # try got no answer at all gets an eighth until it answers again.
        self._per_share = max(1, concurrency - concurrency // 4)
        self._per_struggling_share = max(1, concurrency // 8)
        self._struggling: set[int] = set()
        # Shares whose last try got a quick success: candidates for slots beyond their share.
        self._quick: set[int] = set()
        self._quick_answer = min(quick_answer, timeout / 2)
        self._lease = timeout + LEASE_MARGIN
        # Own retries have exact timers; the poll only catches other instances' work.
        self._poll = min(5.0, max(0.05, min(1.0, time_scale)))
        self._maintenance_every = min(5.0, max(0.05, 5.0 * time_scale))
        self._max_age = policy.max_age(time_scale).total_seconds()
        self._wake = asyncio.Event()
        self._tasks: dict[asyncio.Task[None], Item] = {}
        # When each try in flight started (monotonic), and its share.
        self._started: dict[asyncio.Task[None], tuple[float, int]] = {}
        self._by_share: collections.Counter[int] = collections.Counter()
        self._timers: set[asyncio.TimerHandle] = set()
        # Results of finished tries, written before the next claim (see _settle).
        self._results: list[TryResult] = []
        self._stopping = False

    # --- lifecycle -------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set, then drain (see the class docstring)."""
        helpers = [
            asyncio.create_task(self._relay(stop), name=f"{self._noun}s-stop-relay"),
            asyncio.create_task(self._listen(stop), name=f"{self._noun}s-listen"),
        ]
        try:
            await self._loop(stop)
        finally:
            self._stopping = True
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            await self._drain()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self._settle()
            for timer in self._timers:
                timer.cancel()
            self._timers.clear()

    async def _relay(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._wake.set()

    async def _listen(self, stop: asyncio.Event) -> None:
        """Keep a LISTEN open while running; re-open it when the connection drops."""
        backoff = 0.5
        while not stop.is_set():
            try:
                async with self._queue.listen(self._wake.set) as conn:
                    backoff = 0.5
                    # Anything queued while we were not listening is found by one claim.
                    self._wake.set()
                    while not stop.is_set() and not is_closed(conn):
                        await pause(stop, 1.0)
            except DB_ERRORS as exc:
                log.warning("%ss: LISTEN lost (%s); polling until it is back", self._noun, exc)
            except Exception:
                log.exception("%ss: LISTEN failed; polling until it is back", self._noun)
            await pause(stop, backoff)
            backoff = min(backoff * 2, 5.0)

    async def _loop(self, stop: asyncio.Event) -> None:
        next_maintenance = 0.0
        backoff = 0.0
        while not stop.is_set():
            self._wake.clear()
            try:
                if time.monotonic() >= next_maintenance:
                    await self._maintain()
                    next_maintenance = time.monotonic() + self._maintenance_every
                free = self._concurrency - len(self._tasks)
                if free <= 0:
                    await self._settle()
                else:
                    # Taken before the claim's transaction starts, so the time elapsed since
                    # claimed_at is over- rather than underestimated: retries come a hair
                    # late, never early.
                    claim_started = time.monotonic()
                    # Results go first, in the claim's transaction: a delivered row must be
                    # written before its key's next row can be claimed.
                    batch, self._results = self._results, []
                    try:
                        claimed = await self._queue.claim(
                            free,
                            self._lease,
                            per_share_limit=self._per_share,
                            in_flight=self._by_share,
                            share_limits=dict.fromkeys(
                                self._struggling, self._per_struggling_share
                            ),
                            may_exceed=self._may_exceed(),
                            results=batch,
                        )
                    except BaseException:
                        # Kept for the next round; their leases keep the rows from being
                        # claimed again meanwhile.
                        self._results = batch + self._results
                        raise
                    self._start_all(claimed, claim_started)
                    held = self._queue.held_for()
                    if held is not None:
                        self._wake_at(held)  # a held row (a digest) is due then
                backoff = 0.0
            except DB_ERRORS as exc:
                backoff = min(max(backoff * 2, 0.2), 5.0)
                log.warning("%ss: database unavailable (%s); retrying in %.1fs",
                            self._noun, exc, backoff)
                await pause(stop, backoff)
                continue
            except Exception:
                # A bug or an unexpected database error: say so loudly, but keep the rest of
                # the service (probing, the API) running and try again shortly.
                backoff = min(max(backoff * 2, 0.5), 5.0)
                log.exception("%ss: claiming failed; retrying in %.1fs", self._noun, backoff)
                await pause(stop, backoff)
                continue
            await self._sleep(stop, self._poll)

    def _start_all(self, claimed: Sequence[Item], claim_started: float) -> None:
        """Start one try per claimed item (a group's rows come as one item, see
        :meth:`Sender.members`)."""
        for item in claimed:
            self._start(item, claim_started)

    def _may_exceed(self) -> set[int]:
        """Shares that may take slots beyond their share this claim: the last try got a
        quick success, and none of their tries in flight has been running for longer."""
        if not self._quick:
            return set()
        quick = set(self._quick)
        too_old = time.monotonic() - self._quick_answer
        for started, share in self._started.values():
            if started < too_old:
                quick.discard(share)
        return quick

    async def _sleep(self, stop: asyncio.Event, seconds: float) -> None:
        """Wait for a wake-up (notification, timer, finished try, stop) or ``seconds``."""
        if stop.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        if self._tasks and not stop.is_set():
            await asyncio.sleep(BATCH_WINDOW)

    async def _settle(self) -> None:
        """Write the results of finished tries in one transaction. On failure they are
        kept for the next round and the error propagates to the loop's back-off."""
        if not self._results:
            return
        batch, self._results = self._results, []
        try:
            await self._queue.record_tries(batch)
        except BaseException:
            self._results = batch + self._results
            raise

    async def _maintain(self) -> None:
        """Expire what can no longer be delivered; refresh the queue gauges."""
        expired = await self._queue.expire(self._max_age)
        for e in expired:
            # A tried row whose final try was not claimed in time gave up like one whose
            # final try failed: counted and logged as such, as its reason says.
            result = RESULT_GAVE_UP if e.gave_up else RESULT_EXPIRED
            self._metrics.deliveries.labels(result=result).inc()
            log.warning(
                "%s %d of monitor %d (account %d) %s",
                self._noun, e.id, e.monitor_id, e.account_id,
                "given up after 24 h: its final try was not taken in time" if e.gave_up
                else "expired undelivered after 24 h",
            )
        depth, oldest = await self._queue.stats()
        self._metrics.depth.set(depth)
        self._metrics.oldest.set(oldest)

    async def _drain(self) -> None:
        if not self._tasks:
            return
        tasks = list(self._tasks)
        _, pending = await asyncio.wait(tasks, timeout=self._drain_timeout)
        if not pending:
            return
        items = [self._tasks[t] for t in pending if t in self._tasks]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        # The try may have reached the target, so it counts; the next one is due now for
        # whichever runner runs next. If even this cannot be written, the lease brings the
        # rows back a little later.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):
                await asyncio.gather(*(
                    self._queue.release(
                        row_id, tries, undo_try=False, error="try interrupted by a shutdown",
                    )
                    for item in items
                    for row_id, tries in self._sender.members(item)
                ))

    # --- one try ---------------------------------------------------------------------------

    def _start(self, item: Item, claim_started: float) -> None:
        task = asyncio.create_task(
            self._deliver(item, claim_started), name=f"{self._noun}-{item.id}"
        )
        self._tasks[task] = item
        self._started[task] = (claim_started, item.share)
        self._by_share[item.share] += 1
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        item = self._tasks.pop(task, None)
        self._started.pop(task, None)
        if item is not None:
            self._by_share[item.share] -= 1
            if self._by_share[item.share] <= 0:
                del self._by_share[item.share]
        if not task.cancelled() and task.exception() is not None:
            log.error("%ss: delivery task crashed", self._noun, exc_info=task.exception())
        self._wake.set()

    def _wake_at(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            if handle is not None:
                self._timers.discard(handle)
            self._wake.set()

        # A hair late rather than early: a claim before next_try_at finds nothing.
        handle = loop.call_later(max(0.0, delay) + 0.002, fire)
        self._timers.add(handle)

    async def _deliver(self, item: Item, claim_started: float) -> None:
        members = self._sender.members(item)
        if not self._sender.ready(item):
            # The target was removed between the claim's read and now: nothing was sent.
            for row_id, tries in members:
                await self._record(self._queue.release, row_id, tries, undo_try=True)
            return
        outcome = await self._sender.send(item)
        elapsed = time.monotonic() - claim_started
        # Time on the database's clock, which created_at and next_try_at are in.
        now = item.claimed_at + timedelta(seconds=elapsed)
        self._metrics.deliveries.labels(result=outcome.result).inc()
        share = item.share
        if outcome.got_answer:
            self._struggling.discard(share)
        else:
            self._struggling.add(share)
        if outcome.delivered and elapsed <= self._quick_answer:
            self._quick.add(share)
        else:
            self._quick.discard(share)
        if outcome.delivered:
            self._results.extend(
                TryResult(row_id, tries, "delivered", outcome.status_code)
                for row_id, tries in members
            )
            return
        retry_at = policy.next_try_at(
            created_at=item.created_at, now=now, tries=item.tries, time_scale=self._time_scale,
        )
        if retry_at is None:
            self._metrics.deliveries.labels(result=RESULT_GAVE_UP).inc()
            log.warning(
                "%s %d of monitor %d: try %d failed (%s); giving up after 24 h, marked failed",
                self._noun, item.id, item.monitor_id, item.tries, outcome.error,
            )
            self._results.extend(
                TryResult(row_id, tries, "failed", outcome.status_code,
                          f"gave up after 24 h; last try: {outcome.error}")
                for row_id, tries in members
            )
            return
        delay = (retry_at - now).total_seconds()
        log.warning(
            "%s %d of monitor %d: try %d failed (%s); next try in %.1fs",
            self._noun, item.id, item.monitor_id, item.tries, outcome.error, delay,
        )
        self._results.extend(
            TryResult(row_id, tries, "retry", outcome.status_code, outcome.error, retry_at)
            for row_id, tries in members
        )
        self._wake_at(delay)

    async def _record(self, method: Any, *args: Any, **kwargs: Any) -> None:
        """Run a single queue write outside the batched results, riding out a short
        database blip. If it cannot be written, the claim's lease runs out and the row is
        tried again: never a loss."""
        for attempt in range(3):
            try:
                await method(*args, **kwargs)
                return
            except DB_ERRORS as exc:
                if attempt == 2 or self._stopping:
                    log.warning("%ss: could not record a try (%s); the lease will bring it "
                                "back", self._noun, exc)
                    return
                await asyncio.sleep(0.2 * (attempt + 1))


async def pause(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds`` unless ``stop`` is set first (wake-ups do not cut it short: this
    is a back-off)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
