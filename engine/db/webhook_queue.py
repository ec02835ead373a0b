"""The durable webhook queue: events are inserted in the transaction of the state change
that caused them (:func:`insert_event`); deliverers claim due events with
``FOR UPDATE SKIP LOCKED``, record each try, and the API reads the delivery log.

Life of an event (``webhook_events.status``)::

    pending --200--> delivered
       |  \\--failed try--> pending (next_try_at = back-off)
       \\--24 h (x time scale) without a 200--> failed --retry (API)--> pending (one more try)

Invariants the methods below keep:

- **Per-monitor order.** Only the oldest pending event of a monitor can be claimed, so a
  later event of that monitor waits until the earlier one is delivered or failed; other
  monitors are not held back. (Ids come from one sequence; events of one check are written
  under that check's row lock, so their ids follow the order they happened in.)
- **Exactly one deliverer per try.** A claim locks rows with ``SKIP LOCKED``, increments
  ``tries`` and moves ``next_try_at`` forward by a lease, all in one short transaction: a
  claimed event is invisible to other deliverers until the lease ends. If the deliverer dies,
  the event comes back after the lease as the *next* try of the same id, never as a new event.
- **Stale results are ignored.** Recording a failed try names the try number it was made
  under; a deliverer whose lease ran out cannot overwrite the newer try's schedule. A 200 is
  recorded whatever happened meanwhile: the receiver has the event.
- **Nothing is lost quietly.** An event that cannot be delivered within 24 h (x time scale),
  including one of an account without a webhook URL, ends as ``failed`` and is kept.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import asyncpg

from engine.db.base import CHANNEL_WEBHOOKS, StoreBase
from engine.db.outbox import ExpiredEvent, OutboxQueue, QueueSpec, TryResult
from engine.runtime.errors import NotFound, UpwatchError
from engine.runtime.secretbox import SecretUnreadable, reveal

log = logging.getLogger(__name__)
_UNREADABLE_LOGGED: set[int] = set()

STATUSES = ("pending", "delivered", "failed")

SQL_INSERT_EVENT = """
INSERT INTO webhook_events (account_id, monitor_id, check_id, event, parent_id, body)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id
"""

# Candidates for a claim: due, of an account with a webhook URL that is not excluded (its
# in-flight limit is reached), and the oldest pending event of their monitor. The subquery
# sees an earlier event that another deliverer holds locked (it does not lock), so a later
# event of that monitor is never taken alongside it. Written as "id = the monitor's first
# pending id" rather than NOT EXISTS so that PostgreSQL walks the due index in order and
# probes (monitor_id, id) per row, stopping at the LIMIT: the cost of a claim does not grow
# with the backlog (a NOT EXISTS becomes a hash anti-join over every pending row).
# $1: the clock (NULL = now()), $2: how many rows to lock at most, $3: excluded accounts,
# $4: ids this claim already holds (a transaction does not skip its own locks).
# Candidates for a claim: due, of an account with a webhook URL that is not excluded (its
# in-flight limit is reached), and the oldest pending event of their monitor (the rendered
# SQL and its reasons are in engine.db.outbox).
_EXPIRE_REASON = """CASE
        WHEN a.webhook_url IS NULL AND w.tries = 0
            THEN 'expired: no webhook URL was set within 24 h'
        WHEN a.webhook_url IS NULL
            THEN 'expired: the webhook URL was removed; last try: '
                 || coalesce(w.last_error, 'HTTP ' || w.last_status_code, 'no answer')
        WHEN w.tries = 0
            THEN 'expired after 24 h before any try'
        ELSE 'gave up after 24 h; last try: '
             || coalesce(w.last_error, 'HTTP ' || w.last_status_code, 'no answer')
    END"""

_LOG_COLUMNS = """id, account_id, event, monitor_id, check_id, parent_id, status, tries,
    last_status_code, last_error, next_try_at, created_at, delivered_at"""

SQL_LIST_WEBHOOKS = f"""
SELECT {_LOG_COLUMNS}
FROM webhook_events
WHERE account_id = $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::bigint IS NULL OR id < $3)
ORDER BY id DESC
LIMIT $4
"""


SQL_LOCK_FOR_RETRY = """
SELECT w.status, a.webhook_url
FROM webhook_events w JOIN accounts a ON a.id = w.account_id
WHERE w.id = $1 AND w.account_id = $2
FOR UPDATE OF w
"""

# tries is kept, so X-Service-Current-Try goes on counting on the re-sent event.
SQL_REQUEUE = f"""
UPDATE webhook_events SET status = 'pending', next_try_at = now()
WHERE id = $1
RETURNING {_LOG_COLUMNS}
"""


class NotRetryable(UpwatchError):
    """A retry was asked for an event that is not ``failed`` (the API answers 409)."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ClaimedEvent:
    """One try of one event, claimed by a deliverer.

    ``tries`` is this try's number (1 for the first), already counted in the database.
    ``claimed_at`` is the database clock at the claim: a deliverer measures elapsed time from
    it, so back-off and give-up use the same clock as ``created_at``.
    """

    id: int
    parent_id: int | None
    account_id: int
    monitor_id: int
    check_id: int | None
    event: str
    body: bytes
    tries: int
    created_at: datetime
    token: str
    webhook_url: str | None
    claimed_at: datetime

    @property
    def share(self) -> int:
        """What a deliverer's fair share counts by: the account."""
        return self.account_id

    @property
    def parent_webhook(self) -> int:
        """The ``X-Service-Parent-Webhook`` value: the incident's opener, else itself."""
        return self.parent_id if self.parent_id is not None else self.id

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> ClaimedEvent:
        return cls(
            id=row["id"],
            parent_id=row["parent_id"],
            account_id=row["account_id"],
            monitor_id=row["monitor_id"],
            check_id=row["check_id"],
            event=row["event"],
            body=bytes(row["body"]),
            tries=row["tries"],
            created_at=row["created_at"],
            token=row["token"],
            webhook_url=row["webhook_url"],
            claimed_at=row["claimed_at"],
        )


@dataclass(frozen=True, slots=True)
class WebhookRecord:
    """One event as the delivery log shows it."""

    id: int
    account_id: int
    event: str
    monitor_id: int
    check_id: int | None
    parent_id: int | None
    status: str
    tries: int
    last_status_code: int | None
    last_error: str | None
    next_try_at: datetime
    created_at: datetime
    delivered_at: datetime | None

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> WebhookRecord:
        return cls(**{k: row[k] for k in cls.__slots__})


async def insert_event(
    conn: asyncpg.Connection,
    *,
    account_id: int,
    monitor_id: int,
    check_id: int | None,
    event: str,
    body: bytes,
    parent_id: int | None = None,
) -> int:
    """Queue one webhook event on ``conn`` (the caller's transaction); returns its id.

    ``parent_id`` is the id of the event that opened the incident, for uptime_restored and
    certificate_recovered; the deliverer sends the event's own id when it is None.
    """
    event_id = await conn.fetchval(
        SQL_INSERT_EVENT, account_id, monitor_id, check_id, event, parent_id, body
    )
    await conn.execute("SELECT pg_notify($1, '')", CHANNEL_WEBHOOKS)
    return int(event_id)


WEBHOOK_QUEUE: QueueSpec[ClaimedEvent] = QueueSpec(
    table="webhook_events",
    notify_channel=CHANNEL_WEBHOOKS,
    order_key="monitor_id",
    share_key="account_id",
    target_join="JOIN accounts a ON a.id = e.account_id",
    target_ready="a.webhook_url IS NOT NULL",
    take_from="accounts a",
    take_where="a.id = w.account_id",
    item_columns="""w.id, w.parent_id, w.account_id, w.monitor_id, w.check_id, w.event,
          w.body, w.tries, w.created_at, a.token, a.webhook_url""",
    expire_reason_sql=_EXPIRE_REASON,
    item=ClaimedEvent.from_row,
    delivered_code=200,
)


class WebhookQueueMixin(StoreBase):
    # --- deliverer side (the shared outbox, engine.db.outbox) ------------------------------

    @property
    def webhook_queue(self) -> OutboxQueue[ClaimedEvent]:
        """The webhook table's :class:`OutboxQueue` (made on first use)."""
        queue: OutboxQueue[ClaimedEvent] | None = self.__dict__.get("_webhook_queue")
        if queue is None:
            queue = OutboxQueue(WEBHOOK_QUEUE, self)
            self.__dict__["_webhook_queue"] = queue
        return queue

    async def claim_due(
        self,
        limit: int,
        lease_seconds: float,
        now: datetime | None = None,
        *,
        per_account_limit: int | None = None,
        in_flight: Mapping[int, int] | None = None,
        account_limits: Mapping[int, int] | None = None,
        may_exceed: Collection[int] = (),
        results: Sequence[TryResult] = (),
    ) -> list[ClaimedEvent]:
        """Claim up to ``limit`` due events for one try each, oldest due first.

        Takes only the oldest pending event of each monitor, only for accounts with a webhook
        URL, only when ``next_try_at <= now`` (``now`` defaults to the database clock; tests
        pass one). Each claimed event gets ``tries + 1`` and ``next_try_at = now + lease``,
        committed before this returns: until the lease ends no other deliverer sees it.

        ``per_account_limit`` with ``in_flight`` (account id -> tries the caller has running)
        keeps one account's receiver from taking every slot: an account is given at most
        ``per_account_limit - in_flight[account]`` events; ``account_limits`` sets a
        different limit for some accounts. Candidates passed over stay pending and
        unlocked once this short transaction commits.

        ``may_exceed`` makes the share work-conserving: those accounts may go past their
        limit, up to ``limit``, but only with slots that are left once every account has had
        its share, that is when no other account has a due event that fits its limit. Each
        claim gives the shares out first, so as slots free up another account's due events
        are taken before any more of the accounts past their limit.

        ``results`` (finished tries, as for :meth:`record_tries`) are recorded first, in the
        same transaction: the next event of a monitor whose event was just delivered can be
        claimed at once, and a round of the deliverer costs one commit, not two. If anything
        fails, neither the results nor the claim are written.
        """
        events = await self.webhook_queue.claim(
            limit, lease_seconds, now,
            per_share_limit=per_account_limit, in_flight=in_flight,
            share_limits=account_limits, may_exceed=may_exceed, results=results,
        )
        return [self._revealed(e) for e in events]

    def _revealed(self, event: ClaimedEvent) -> ClaimedEvent:
        """The event with the account's token and webhook URL decrypted. A key
        that cannot decrypt them (another node's) leaves the URL out: nothing is sent, the
        event waits, and the error is logged once per account."""
        try:
            token = reveal(self.secrets, event.token) or ""
            url = reveal(self.secrets, event.webhook_url)
        except SecretUnreadable:
            if event.account_id not in _UNREADABLE_LOGGED:
                _UNREADABLE_LOGGED.add(event.account_id)
                log.error("account %d: webhook secrets cannot be decrypted with this secret "
                          "key; its webhooks wait", event.account_id)
            return replace(event, webhook_url=None)
        return replace(event, token=token, webhook_url=url)

    async def record_delivered(self, event_id: int, status_code: int = 200) -> bool:
        """The receiver answered 200: the event is delivered. False if it already was."""
        return await self.webhook_queue.record_delivered(event_id, status_code)

    async def record_failed_try(
        self,
        event_id: int,
        status_code: int | None,
        error: str | None,
        next_try_at: datetime,
        *,
        tries: int | None = None,
    ) -> bool:
        """A try failed; the event stays pending and is due again at ``next_try_at``.

        ``tries`` is the number of the try that failed: the write is skipped (False) when the
        event has moved on since (its lease ran out and another try was claimed) or is no
        longer pending.
        """
        return await self.webhook_queue.record_failed_try(
            event_id, status_code, error, next_try_at, tries=tries
        )

    async def mark_failed(
        self,
        event_id: int,
        status_code: int | None,
        error: str | None,
        *,
        tries: int | None = None,
    ) -> bool:
        """Give up on a pending event: it becomes ``failed`` and is kept (same guard as
        :meth:`record_failed_try`)."""
        return await self.webhook_queue.mark_failed(event_id, status_code, error, tries=tries)

    async def record_tries(self, results: Sequence[TryResult]) -> None:
        """Record many finished tries in one short transaction, with the same semantics and
        guards as :meth:`record_delivered`, :meth:`record_failed_try` and
        :meth:`mark_failed`. A deliverer calls this before its next claim, so the next event
        of a monitor is only claimable once the previous one's result is committed."""
        await self.webhook_queue.record_tries(results)

    async def release_claim(
        self, event_id: int, tries: int, *, undo_try: bool, error: str | None = None
    ) -> bool:
        """Hand a claimed event back so any deliverer takes it at once.

        ``undo_try`` takes the try back when nothing was sent; otherwise the try counts (it
        may have reached the receiver) and the next one carries the next number.
        """
        return await self.webhook_queue.release(event_id, tries, undo_try=undo_try, error=error)

    async def expire_webhooks(
        self, max_age_seconds: float, now: datetime | None = None
    ) -> list[ExpiredEvent]:
        """Mark pending events older than ``max_age_seconds`` ``failed`` (with a reason in
        ``last_error``), except those whose final try is scheduled or in flight; returns
        them."""
        return await self.webhook_queue.expire(max_age_seconds, now)

    async def webhook_queue_stats(self) -> tuple[int, float]:
        """(pending events, age in seconds of the oldest pending one; 0 when none)."""
        return await self.webhook_queue.stats()

    def listen_webhooks(
        self, on_notify: Callable[[], None]
    ) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        """LISTEN on ``upwatch_webhooks`` for the life of the context; ``on_notify`` is called
        (on the event loop) for every notification. Yields the listening connection so the
        caller can see it close (``is_closed()``) and listen again."""
        return self.webhook_queue.listen(on_notify)

    # --- delivery log (API) ----------------------------------------------------------------

    async def list_webhooks(
        self,
        account_id: int,
        *,
        status: str | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[WebhookRecord]:
        """The account's events, newest first; ``before_id`` pages (ids below it)."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        rows = await self._fetch(SQL_LIST_WEBHOOKS, account_id, status, before_id, limit)
        return [WebhookRecord.from_row(r) for r in rows]

    async def retry_webhook(self, account_id: int, event_id: int) -> WebhookRecord:
        """Re-queue a ``failed`` event for one more try now (``tries`` is kept, so
        ``X-Service-Current-Try`` continues). If that try fails too, the event is ``failed``
        again: its 24 h are over, so there is no automatic back-off.

        Raises NotFound for an unknown id or another account's event, NotRetryable when the
        event is not failed or the account has no webhook URL to send it to.
        """
        async with self._tx() as conn:
            row = await conn.fetchrow(SQL_LOCK_FOR_RETRY, event_id, account_id)
            if row is None:
                raise NotFound("Webhook not found.")
            if row["status"] != "failed":
                raise NotRetryable(
                    f"Only a failed webhook can be retried; this one is {row['status']}.",
                    row["status"],
                )
            if row["webhook_url"] is None:
                raise NotRetryable(
                    "The account has no webhook URL; set one before retrying.", row["status"]
                )
            updated = await conn.fetchrow(SQL_REQUEUE, event_id)
            await self._notify(conn, CHANNEL_WEBHOOKS)
        assert updated is not None
        return WebhookRecord.from_row(updated)
