"""The webhook deliverer: claims due events from the durable queue and POSTs them.

Contract (decisions.md "Webhooks"):

- Only a 200 answer ends delivery. Anything else (another status, a redirect, which is not
  followed, a timeout, a refused or closed connection, a blocked address) is a failed try,
  retried with :mod:`engine.webhooks.policy` until 24 h (x time scale) after the event, then
  the event is ``failed`` and kept.
- Every try carries ``X-Service-Webhook`` (the event id, the same on every try),
  ``X-Service-Current-Try`` (1, 2, ...), ``X-Service-Parent-Webhook`` (the incident's opening
  event, else the event itself) and ``X-Service-Signature`` over the exact stored body bytes.
- Per-monitor order and one-sender-per-try come from the store's claim
  (:meth:`engine.db.webhook_queue.WebhookQueueMixin.claim_due`); several deliverers, in one
  process or many, can run against one database.
- The private-address rule is applied to the addresses the connection is made to: the host
  is resolved on every try and every address checked before connecting to one of them (IP
  literals are checked as they are), so a DNS change after the URL was accepted cannot
  reach an internal address (:mod:`engine.webhooks.http`).
- A dead or slow receiver costs at most one concurrency slot per try for at most
  ``webhook_timeout``. One account's share is three quarters of the slots while its receiver
  answers, and an eighth once a try of it got no answer at all, so the others always find
  free slots; nothing here blocks the event loop, so probing goes on. The share is
  work-conserving for a receiver that answers 200 quickly: such an account may also take the
  slots no other account has a due event for (the usual self-hosted instance has one
  account), and every claim serves the other accounts' shares first, so as its tries end
  their slots go to the others. A receiver that turns slow loses the extra slots at once;
  the ones it holds come back within ``webhook_timeout``.
- Results of finished tries are written in one batch, in the claim's transaction and before
  its queries, so the next event of a monitor only becomes claimable once the previous one's
  result is written (and both are committed together).

Wake-ups: LISTEN ``upwatch_webhooks`` (new events, a URL set, a manual retry), a timer at
each retry this deliverer scheduled, the end of every try (a slot freed, and the next event of
that monitor may now be due), and a periodic poll for everything else (retries scheduled by
another instance, a lost notification, a lease that ran out).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg

from engine import USER_AGENT
from engine.db.webhook_queue import ClaimedEvent, TryResult, WebhookQueueMixin
from engine.errors import DatabaseUnavailable
from engine.metrics import Metrics
from engine.netpolicy import Resolver
from engine.settings import Settings
from engine.webhooks import policy
from engine.webhooks.http import (
    MAX_RESPONSE_BODY,
    BadUrl,
    BlockedTarget,
    ConnectError,
    NoAnswer,
    ResolveError,
    WebhookClient,
    parse_url,
)
from engine.webhooks.signing import SIGNATURE_256_HEADER, sign, sign_256

log = logging.getLogger(__name__)

# "The database is not there right now": DatabaseUnavailable from the store, plus what asyncpg
# raises when a connection is lost in the middle of a query (the store maps only acquiring).
_DB_ERRORS: tuple[type[BaseException], ...] = (
    DatabaseUnavailable,
    OSError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
)

__all__ = ["MAX_RESPONSE_BODY", "BlockedTarget", "Deliverer", "Outcome", "delivery_headers"]
# The lease covers one try (bounded by webhook_timeout) plus recording its result.
LEASE_MARGIN = 5.0
# Connect timeout, within the total: a receiver that does not accept in this long is down.
MAX_CONNECT_TIMEOUT = 5.0
# While tries are in flight, a wake-up waits this long for more of them to finish, so their
# results are written and their slots refilled in one round trip instead of one each.
BATCH_WINDOW = 0.005
# A receiver whose last try got a 200 within this long (and none of whose tries in flight has
# taken longer) may use slots beyond its account's share. Short, so that a receiver that turns
# slow can only be holding extra slots it took while it was fast.
QUICK_ANSWER = 1.0

# deliveries_total{result=...}: one per try, plus gave_up/expired once per event that ends
# failed (by the deliverer after its last try, or by the expiry sweep).
RESULT_DELIVERED = "delivered"
RESULT_HTTP_ERROR = "http_error"
RESULT_REDIRECT = "redirect"
RESULT_TIMEOUT = "timeout"
RESULT_CONNECTION_ERROR = "connection_error"
RESULT_BLOCKED = "blocked"
RESULT_GAVE_UP = "gave_up"
RESULT_EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one try came to. ``status_code`` is None when no response arrived."""

    result: str
    status_code: int | None = None
    error: str | None = None

    @property
    def delivered(self) -> bool:
        return self.result == RESULT_DELIVERED


def delivery_headers(event: ClaimedEvent) -> dict[str, str]:
    """The headers of one try, exactly as api.md section 6 and decisions.md name them."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Service-Webhook": str(event.id),
        "X-Service-Current-Try": str(event.tries),
        "X-Service-Parent-Webhook": str(event.parent_webhook),
        "X-Service-Signature": sign(event.body, event.token),
        SIGNATURE_256_HEADER: sign_256(event.body, event.token, int(time.time())),
    }


# The same for every try; Accept as any client sends it. No Accept-Encoding: a body is only
# quoted, never decompressed.
_FIXED_HEADERS = (
    f"Content-Type: application/json\r\nUser-Agent: {USER_AGENT}\r\nAccept: */*\r\n"
).encode("latin-1")


def _header_lines(event: ClaimedEvent) -> bytes:
    """:func:`delivery_headers` as the request's header lines, made without a dict."""
    return _FIXED_HEADERS + (
        b"X-Service-Webhook: %d\r\nX-Service-Current-Try: %d\r\n"
        b"X-Service-Parent-Webhook: %d\r\nX-Service-Signature: %s\r\n"
        b"X-Service-Signature-256: %s\r\n"
        % (event.id, event.tries, event.parent_webhook,
           sign(event.body, event.token).encode("ascii"),
           sign_256(event.body, event.token, int(time.time())).encode("ascii"))
    )


class Deliverer:
    """Delivers queued webhook events until stopped.

    ``run(stop)`` returns once ``stop`` is set and in-flight tries have finished or, after
    ``drain_timeout`` seconds, been handed back to the queue (counted as made, due at once).
    """

    def __init__(
        self,
        store: WebhookQueueMixin,
        settings: Settings,
        *,
        metrics: Metrics | None = None,
        drain_timeout: float = 5.0,
        resolver: Resolver | None = None,
    ) -> None:
        self._store = store
        self._settings = settings
        self._resolver = resolver
        self._metrics = metrics or Metrics()
        self._drain_timeout = drain_timeout
        self._concurrency = settings.webhook_concurrency
        # Slots per account. A healthy receiver may use all but a quarter of them (the
        # quarter stays free for everyone else); one whose last try got no answer at all
        # (timeout, refused, blocked) gets an eighth until it answers again, so a few dead
        # receivers cannot take every slot for webhook_timeout at a time.
        self._per_account = max(1, self._concurrency - self._concurrency // 4)
        self._per_struggling_account = max(1, self._concurrency // 8)
        self._struggling: set[int] = set()
        # Accounts whose last try got a quick 200: candidates for slots beyond their share.
        self._quick: set[int] = set()
        self._timeout = settings.webhook_timeout
        self._quick_answer = min(QUICK_ANSWER, settings.webhook_timeout / 2)
        self._lease = settings.webhook_timeout + LEASE_MARGIN
        scale = settings.time_scale
        # Own retries have exact timers; the poll only catches other instances' work.
        self._poll = min(5.0, max(0.05, min(1.0, scale)))
        self._maintenance_every = min(5.0, max(0.05, 5.0 * scale))
        self._max_age = policy.max_age(scale).total_seconds()
        self._wake = asyncio.Event()
        self._tasks: dict[asyncio.Task[None], ClaimedEvent] = {}
        # When each try in flight started (monotonic), and its account.
        self._started: dict[asyncio.Task[None], tuple[float, int]] = {}
        self._by_account: collections.Counter[int] = collections.Counter()
        self._timers: set[asyncio.TimerHandle] = set()
        # Results of finished tries, written before the next claim (see _settle).
        self._results: list[TryResult] = []
        self._client = WebhookClient(
            allow_private=settings.allow_private_targets, resolver=resolver
        )
        self._connect_timeout = min(self._timeout, MAX_CONNECT_TIMEOUT)
        self._stopping = False

    # --- lifecycle -------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set, then drain (see the class docstring)."""
        helpers = [
            asyncio.create_task(self._relay(stop), name="webhooks-stop-relay"),
            asyncio.create_task(self._listen(stop), name="webhooks-listen"),
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
                async with self._store.listen_webhooks(self._wake.set) as conn:
                    backoff = 0.5
                    # Anything queued while we were not listening is found by one claim.
                    self._wake.set()
                    while not stop.is_set() and not conn.is_closed():
                        await _pause(stop, 1.0)
            except _DB_ERRORS as exc:
                log.warning("webhooks: LISTEN lost (%s); polling until it is back", exc)
            except Exception:
                log.exception("webhooks: LISTEN failed; polling until it is back")
            await _pause(stop, backoff)
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
                    # Results go first, in the claim's transaction: a delivered event must
                    # be written before its monitor's next event can be claimed.
                    batch, self._results = self._results, []
                    try:
                        claimed = await self._store.claim_due(
                            free,
                            self._lease,
                            per_account_limit=self._per_account,
                            in_flight=self._by_account,
                            account_limits=dict.fromkeys(
                                self._struggling, self._per_struggling_account
                            ),
                            may_exceed=self._may_exceed(),
                            results=batch,
                        )
                    except BaseException:
                        # Kept for the next round; their leases keep the events from being
                        # claimed again meanwhile.
                        self._results = batch + self._results
                        raise
                    for event in claimed:
                        self._start(event, claim_started)
                backoff = 0.0
            except _DB_ERRORS as exc:
                backoff = min(max(backoff * 2, 0.2), 5.0)
                log.warning("webhooks: database unavailable (%s); retrying in %.1fs", exc, backoff)
                await _pause(stop, backoff)
                continue
            except Exception:
                # A bug or an unexpected database error: say so loudly, but keep the rest of
                # the service (probing, the API) running and try again shortly.
                backoff = min(max(backoff * 2, 0.5), 5.0)
                log.exception("webhooks: claiming failed; retrying in %.1fs", backoff)
                await _pause(stop, backoff)
                continue
            await self._sleep(stop, self._poll)

    def _may_exceed(self) -> set[int]:
        """Accounts that may take slots beyond their share this claim: the last try got a
        quick 200, and none of their tries in flight has been running for longer."""
        if not self._quick:
            return set()
        quick = set(self._quick)
        too_old = time.monotonic() - self._quick_answer
        for started, account in self._started.values():
            if started < too_old:
                quick.discard(account)
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
        kept for the next round (their leases keep the events from being claimed again
        meanwhile) and the error propagates to the loop's back-off."""
        if not self._results:
            return
        batch, self._results = self._results, []
        try:
            await self._store.record_tries(batch)
        except BaseException:
            self._results = batch + self._results
            raise

    async def _maintain(self) -> None:
        """Expire what can no longer be delivered; refresh the queue gauges."""
        expired = await self._store.expire_webhooks(self._max_age)
        for e in expired:
            self._metrics.deliveries.labels(result=RESULT_EXPIRED).inc()
            log.warning(
                "webhook %d of monitor %d (account %d) expired undelivered after 24 h",
                e.id, e.monitor_id, e.account_id,
            )
        depth, oldest = await self._store.webhook_queue_stats()
        self._metrics.webhook_queue_depth.set(depth)
        self._metrics.webhook_oldest_pending.set(oldest)

    async def _drain(self) -> None:
        if not self._tasks:
            return
        tasks = list(self._tasks)
        _, pending = await asyncio.wait(tasks, timeout=self._drain_timeout)
        if not pending:
            return
        events = [self._tasks[t] for t in pending if t in self._tasks]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        # The try may have reached the receiver, so it counts; the next one is due now for
        # whichever deliverer runs next. If even this cannot be written, the lease brings
        # the events back a little later.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):
                await asyncio.gather(*(
                    self._store.release_claim(
                        event.id, event.tries, undo_try=False,
                        error="try interrupted by a shutdown",
                    )
                    for event in events
                ))

    # --- one try ---------------------------------------------------------------------------

    def _start(self, event: ClaimedEvent, claim_started: float) -> None:
        task = asyncio.create_task(
            self._deliver(event, claim_started), name=f"webhook-{event.id}"
        )
        self._tasks[task] = event
        self._started[task] = (claim_started, event.account_id)
        self._by_account[event.account_id] += 1
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        event = self._tasks.pop(task, None)
        self._started.pop(task, None)
        if event is not None:
            self._by_account[event.account_id] -= 1
            if self._by_account[event.account_id] <= 0:
                del self._by_account[event.account_id]
        if not task.cancelled() and task.exception() is not None:
            log.error("webhooks: delivery task crashed", exc_info=task.exception())
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

    async def _deliver(self, event: ClaimedEvent, claim_started: float) -> None:
        if event.webhook_url is None:
            # The URL was removed between the claim's read and now: nothing was sent.
            await self._record(self._store.release_claim, event.id, event.tries, undo_try=True)
            return
        outcome = await self._attempt(event)
        elapsed = time.monotonic() - claim_started
        # Time on the database's clock, which created_at and next_try_at are in.
        now = event.claimed_at + timedelta(seconds=elapsed)
        self._metrics.deliveries.labels(result=outcome.result).inc()
        if outcome.status_code is None:
            self._struggling.add(event.account_id)
        else:
            self._struggling.discard(event.account_id)
        if outcome.delivered and elapsed <= self._quick_answer:
            self._quick.add(event.account_id)
        else:
            self._quick.discard(event.account_id)
        if outcome.delivered:
            self._results.append(TryResult(event.id, event.tries, "delivered", 200))
            return
        retry_at = policy.next_try_at(
            created_at=event.created_at,
            now=now,
            tries=event.tries,
            time_scale=self._settings.time_scale,
        )
        if retry_at is None:
            self._metrics.deliveries.labels(result=RESULT_GAVE_UP).inc()
            log.warning(
                "webhook %d of monitor %d: try %d failed (%s); giving up after 24 h, "
                "marked failed",
                event.id, event.monitor_id, event.tries, outcome.error,
            )
            self._results.append(TryResult(
                event.id, event.tries, "failed", outcome.status_code,
                f"gave up after 24 h; last try: {outcome.error}",
            ))
            return
        delay = (retry_at - now).total_seconds()
        log.warning(
            "webhook %d of monitor %d: try %d failed (%s); next try in %.1fs",
            event.id, event.monitor_id, event.tries, outcome.error, delay,
        )
        self._results.append(TryResult(
            event.id, event.tries, "retry", outcome.status_code, outcome.error, retry_at,
        ))
        self._wake_at(delay)

    async def _record(self, method: Any, *args: Any, **kwargs: Any) -> None:
        """Run a single store write outside the batched results, riding out a short
        database blip. If it cannot be written, the claim's lease runs out and the event
        is tried again: never a loss."""
        for attempt in range(3):
            try:
                await method(*args, **kwargs)
                return
            except _DB_ERRORS as exc:
                if attempt == 2 or self._stopping:
                    log.warning("webhooks: could not record a try (%s); the lease will "
                                "bring the event back", exc)
                    return
                await asyncio.sleep(0.2 * (attempt + 1))

    async def _attempt(self, event: ClaimedEvent) -> Outcome:
        """One POST of ``event``; never raises (apart from cancellation)."""
        assert event.webhook_url is not None
        try:
            target = parse_url(event.webhook_url)
        except BadUrl as exc:
            return Outcome(RESULT_CONNECTION_ERROR, error=str(exc))
        try:
            # One deadline for the whole try: resolving, connecting, sending and the answer.
            answer = await self._client.post(
                target, _header_lines(event), event.body,
                timeout=self._timeout, connect_timeout=self._connect_timeout,
            )
        except BlockedTarget as exc:
            return Outcome(RESULT_BLOCKED, error=f"{exc}; refused")
        except ResolveError as exc:
            return Outcome(RESULT_CONNECTION_ERROR,
                           error=f"cannot resolve the webhook host: {exc}")
        except ConnectError as exc:
            return Outcome(RESULT_CONNECTION_ERROR, error=f"cannot connect: {exc}")
        except NoAnswer as exc:
            return Outcome(RESULT_CONNECTION_ERROR, error=str(exc))
        except TimeoutError:  # before OSError: TimeoutError is one
            return Outcome(RESULT_TIMEOUT,
                           error=f"no answer within {self._timeout:g}s (timed out)")
        except OSError as exc:
            return Outcome(RESULT_CONNECTION_ERROR, error=f"connection error: {exc}")
        except Exception as exc:
            # Not expected; still a failed try with its words, not a crashed task whose
            # event would only come back after its lease.
            log.exception("webhooks: unexpected error in a try of webhook %d", event.id)
            return Outcome(RESULT_CONNECTION_ERROR, error=f"{type(exc).__name__}: {exc}")
        status = answer.status
        if status == 200:
            return Outcome(RESULT_DELIVERED, status_code=200)
        if 300 <= status < 400:
            where = f" to {answer.location}" if answer.location else ""
            return Outcome(RESULT_REDIRECT, status_code=status,
                           error=f"HTTP {status}: redirect{where} not followed")
        # One line in a log and a table cell.
        snippet = " ".join(answer.snippet.decode("utf-8", "replace").split())
        detail = f": {snippet}" if snippet else ""
        return Outcome(RESULT_HTTP_ERROR, status_code=status, error=f"HTTP {status}{detail}")


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds`` unless ``stop`` is set first (wake-ups do not cut it short: this
    is a back-off)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
