"""One durable outbox, several kinds of message: the claiming, ordering, try recording,
release, expiry, stats and LISTEN that webhooks and notifications share.

Each kind has its own table (one kind's backlog never slows the other's claims) described by
a :class:`QueueSpec`; :class:`OutboxQueue` renders the spec's SQL once and runs it. The
life of a row (``status``)::

    pending --delivered--> delivered
       |  \\--failed try--> pending (next_try_at = back-off)
       \\--24 h (x time scale) without success--> failed

Invariants (see :mod:`engine.db.webhook_queue` for the webhook's words on each):

- **Order.** Only the oldest pending row of its ``order_key`` (webhooks: the monitor;
  notifications: the channel) can be claimed, so a later row waits until the earlier one is
  delivered or failed; other keys are not held back.
- **One sender per try.** A claim locks rows with ``SKIP LOCKED``, counts the try and moves
  ``next_try_at`` forward by a lease in one short transaction.
- **Stale results are ignored.** A failed try is recorded only under the try number it was
  made with; a success is recorded whatever happened meanwhile.
- **Nothing is lost quietly.** A row that cannot be delivered within its age limit ends as
  ``failed`` with a reason, and is kept.
- **Groups.** With a ``group_column``, pending rows sharing the claimed head row's order key
  and (non-null) group value are claimed with it, as one message (a notification digest).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

import asyncpg

from engine.db.base import StoreBase
from engine.db.pool import is_closed

Item = TypeVar("Item")


@dataclass(frozen=True, slots=True)
class QueueSpec(Generic[Item]):
    """What differs between two kinds of outbox row.

    ``target_join`` joins the row ``e`` to what it is sent to; ``target_ready`` is true when
    that target can take a try now (else the row waits, and expires with
    ``expire_reason_sql``, a CASE over ``w`` and the target naming why). ``take_from`` /
    ``take_where`` / ``item_columns`` shape the claimed rows that ``item`` turns into
    objects. ``share_key`` is the column a deliverer's fair share counts by.
    """

    table: str
    notify_channel: str
    order_key: str
    share_key: str
    target_join: str
    target_ready: str
    take_from: str
    take_where: str
    item_columns: str
    expire_reason_sql: str
    item: Callable[[asyncpg.Record], Item]
    group_column: str | None = None
    # The status code recorded for a success that names none.
    delivered_code: int | None = None


@dataclass(frozen=True, slots=True)
class TryResult:
    """How one claimed try ended, for :meth:`OutboxQueue.record_tries`.

    ``outcome`` is ``delivered``, ``retry`` (failed; due again at ``next_try_at``) or
    ``failed`` (failed, and the row is given up).
    """

    id: int
    tries: int
    outcome: str
    status_code: int | None = None
    error: str | None = None
    next_try_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ExpiredEvent:
    """A row the sweep marked failed. ``gave_up``: it was tried and its target could
    still take tries (its reason says "gave up"), as opposed to never tried or of a target
    that went away."""

    id: int
    account_id: int
    monitor_id: int
    gave_up: bool = False


@dataclass(frozen=True, slots=True)
class _Sql:
    candidates: str
    group: str | None
    take: str
    delivered: str
    failed_try: str
    mark_failed: str
    delivered_many: str
    failed_tries: str
    mark_failed_many: str
    release: str
    expire: str
    stats: str


def _render(spec: QueueSpec[Any]) -> _Sql:
    t = spec.table
    # Candidates: due, of a ready target not excluded (its share is full), and the oldest
    # pending row of its order key. The subquery sees an earlier row another deliverer holds
    # locked (it does not lock), so a later row is never taken alongside it. Written as
    # "id = the key's first pending id" so PostgreSQL walks the due index in order and probes
    # (key, id) per row, stopping at the LIMIT: a claim's cost does not grow with the backlog.
    # $1: the clock (NULL = now()), $2: rows at most, $3: excluded shares, $4: ids held.
    candidates = f"""
SELECT e.id, e.{spec.share_key} AS share
FROM {t} e
{spec.target_join}
WHERE e.status = 'pending'
  AND e.next_try_at <= coalesce($1::timestamptz, now())
  AND {spec.target_ready}
  AND NOT (e.{spec.share_key} = ANY($3::bigint[]))
  AND NOT (e.id = ANY($4::bigint[]))
  AND e.id = (
      SELECT p.id FROM {t} p
      WHERE p.{spec.order_key} = e.{spec.order_key} AND p.status = 'pending'
      ORDER BY p.id
      LIMIT 1
  )
ORDER BY e.next_try_at
LIMIT $2
FOR UPDATE OF e SKIP LOCKED
"""
    group = None
    if spec.group_column is not None:
        g, k = spec.group_column, spec.order_key
        # The rest of each claimed head's group. $1: the heads.
        group = f"""
SELECT m.id
FROM {t} m
WHERE m.status = 'pending'
  AND (m.{k}, m.{g}) IN (
      SELECT h.{k}, h.{g} FROM {t} h WHERE h.id = ANY($1::bigint[]) AND h.{g} IS NOT NULL)
  AND NOT (m.id = ANY($1::bigint[]))
ORDER BY m.id
FOR UPDATE OF m SKIP LOCKED
"""
    # $1: ids chosen, $2: the clock, $3: lease in seconds.
    take = f"""
UPDATE {t} w
SET tries = w.tries + 1,
    next_try_at = coalesce($2::timestamptz, now()) + make_interval(secs => $3::float8)
FROM {spec.take_from}
WHERE w.id = ANY($1::bigint[]) AND {spec.take_where}
RETURNING {spec.item_columns}, coalesce($2::timestamptz, now()) AS claimed_at
"""
    # A success ends delivery whatever the row says now (a stale lease, an expiry that raced
    # the try): the receiver has it, and the log must say so.
    delivered = f"""
UPDATE {t}
SET status = 'delivered', delivered_at = now(), last_status_code = $2, last_error = NULL
WHERE id = $1 AND status <> 'delivered'
"""
    failed_try = f"""
UPDATE {t}
SET last_status_code = $2, last_error = $3, next_try_at = $4
WHERE id = $1 AND status = 'pending' AND ($5::int IS NULL OR tries = $5)
"""
    mark_failed = f"""
UPDATE {t}
SET status = 'failed', last_status_code = $2, last_error = $3
WHERE id = $1 AND status = 'pending' AND ($4::int IS NULL OR tries = $4)
"""
    delivered_many = f"""
UPDATE {t} w
SET status = 'delivered', delivered_at = now(), last_status_code = v.code, last_error = NULL
FROM unnest($1::bigint[], $2::int[]) AS v(id, code)
WHERE w.id = v.id AND w.status <> 'delivered'
"""
    failed_tries = f"""
UPDATE {t} w
SET last_status_code = v.code, last_error = v.error, next_try_at = v.at
FROM unnest($1::bigint[], $2::int[], $3::int[], $4::text[], $5::timestamptz[])
     AS v(id, tries, code, error, at)
WHERE w.id = v.id AND w.status = 'pending' AND w.tries = v.tries
"""
    mark_failed_many = f"""
UPDATE {t} w
SET status = 'failed', last_status_code = v.code, last_error = v.error
FROM unnest($1::bigint[], $2::int[], $3::int[], $4::text[]) AS v(id, tries, code, error)
WHERE w.id = v.id AND w.status = 'pending' AND w.tries = v.tries
"""
    # Hand a claimed row back at once (shutdown, or the target vanished between claim and
    # send). $3 true takes the try back (nothing was sent).
    release = f"""
UPDATE {t}
SET next_try_at = now(),
    tries = tries - CASE WHEN $3 THEN 1 ELSE 0 END,
    last_error = coalesce($4, last_error)
WHERE id = $1 AND status = 'pending' AND tries = $2
"""
    # Expiry of rows that were never going to get their final try: held back, never tried,
    # or of a target that is not ready. A row whose next_try_at lies at or past its deadline
    # is a try in flight or the final try: its deliverer settles it, so a sweep never races
    # a try in progress. $1: max age in seconds, $2: the clock (NULL = now()).
    expire = f"""
UPDATE {t} w
SET status = 'failed', last_error = {spec.expire_reason_sql}
FROM {spec.take_from}
WHERE {spec.take_where}
  AND w.status = 'pending'
  AND w.created_at + make_interval(secs => $1::float8) <= coalesce($2::timestamptz, now())
  AND w.next_try_at < w.created_at + make_interval(secs => $1::float8)
RETURNING w.id, w.account_id, w.monitor_id, w.last_error
"""
    stats = f"""
SELECT count(*) AS depth,
       coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS oldest
FROM {t}
WHERE status = 'pending'
"""
    return _Sql(candidates, group, take, delivered, failed_try, mark_failed, delivered_many,
                failed_tries, mark_failed_many, release, expire, stats)


class OutboxQueue(Generic[Item]):
    """The shared queue operations over one :class:`QueueSpec`'s table, through ``store``'s
    pool. ``log_tries`` (optional) writes a try log in the same transaction as the results.
    """

    def __init__(
        self,
        spec: QueueSpec[Item],
        store: StoreBase,
        *,
        log_tries: Callable[[asyncpg.Connection, Sequence[TryResult]], Any] | None = None,
    ) -> None:
        self.spec = spec
        self._store = store
        self._sql = _render(spec)
        self._log_tries = log_tries

    async def notify(self, conn: asyncpg.Connection) -> None:
        """Wake the deliverers once the caller's transaction commits."""
        await conn.execute("SELECT pg_notify($1, '')", self.spec.notify_channel)

    async def claim(
        self,
        limit: int,
        lease_seconds: float,
        now: datetime | None = None,
        *,
        per_share_limit: int | None = None,
        in_flight: Mapping[int, int] | None = None,
        share_limits: Mapping[int, int] | None = None,
        may_exceed: Collection[int] = (),
        results: Sequence[TryResult] = (),
    ) -> list[Item]:
        """Claim up to ``limit`` due rows (plus the rest of their groups) for one try each,
        oldest due first.

        Takes only the oldest pending row of each ordering key (a webhook's monitor), only
        rows the spec finds deliverable, only when ``next_try_at <= now`` (``now`` defaults to
        the database clock; tests pass one). Each claimed row gets ``tries + 1`` and
        ``next_try_at = now + lease``, committed before this returns: until the lease ends no
        other runner sees it.

        ``per_share_limit`` with ``in_flight`` (share -> tries the caller has running) keeps
        one share (an account) from taking every slot: a share is given at most
        ``per_share_limit - in_flight[share]`` rows; ``share_limits`` sets a different limit
        for some shares. Candidates passed over stay pending and unlocked once this short
        transaction commits.

        ``may_exceed`` makes the share work-conserving: those shares may go past their limit,
        up to ``limit``, but only with slots left once every share has had its due, that is
        when no other share has a due row that fits its limit. Each claim gives the shares
        out first, so as slots free up another share's due rows are taken before any more of
        the shares past their limit.

        ``results`` (finished tries, as for :meth:`record_tries`) are recorded first, in the
        same transaction: the next row of a key whose row was just delivered can be claimed
        at once, and a round of the runner costs one commit, not two. If anything fails,
        neither the results nor the claim are written.
        """
        if limit <= 0:
            if results:
                await self.record_tries(results)
            return []
        busy = dict(in_flight or {})
        overrides = dict(share_limits or {})

        def cap(share: int) -> int | None:
            return overrides.get(share, per_share_limit)

        spare = frozenset(may_exceed)
        # True once every share had its due and slots are still free (see below).
        overflow = False

        def full(share: int) -> bool:
            if overflow and share in spare:
                return False
            c = cap(share)
            return c is not None and busy.get(share, 0) >= c

        chosen: list[int] = []
        sql = self._sql
        async with self._store._tx() as conn:
            await self._record(conn, results)
            # Each round skips shares at their limit; another round fetches more when this
            # batch filled a share up and left slots for others. Once a round within the
            # limits leaves slots free with nothing skipped, no other share has anything
            # due, and one last round lets the may_exceed shares have the rest. Bounded:
            # four queries at most.
            for _ in range(4):
                excluded = [s for s in busy if full(s)]
                want = limit - len(chosen)
                candidates = await conn.fetch(sql.candidates, now, want, excluded, chosen)
                skipped = False
                for row in candidates:
                    share = row["share"]
                    if full(share):
                        skipped = True
                        continue
                    busy[share] = busy.get(share, 0) + 1
                    chosen.append(row["id"])
                if len(chosen) >= limit or overflow:
                    break
                if not skipped:
                    if not any(full(s) for s in spare):
                        break
                    overflow = True
            if not chosen:
                return []
            chosen = await self._expand(conn, chosen, now)
            if not chosen:
                return []
            rows = await conn.fetch(sql.take, chosen, now, float(lease_seconds))
        # RETURNING has no order; keep the claim's (oldest due first).
        position = {row_id: i for i, row_id in enumerate(chosen)}
        rows = sorted(rows, key=lambda r: position[r["id"]])
        return [self.spec.item(r) for r in rows]

    def held_for(self) -> float | None:
        """Seconds until the first row the last claims held back (see :meth:`_expand`) is
        due, for the runner to wake then rather than at its next poll; None when none."""
        return None

    async def _expand(
        self, conn: asyncpg.Connection, heads: list[int], now: datetime | None
    ) -> list[int]:
        """The rows a claim takes for ``heads`` (the chosen candidates, locked): the heads
        and, with a ``group_column``, the rest of their groups. A kind may hold a head back
        here (in the claim's transaction) by leaving it out."""
        if self._sql.group is None:
            return heads
        return heads + [r["id"] for r in await conn.fetch(self._sql.group, heads)]

    async def record_delivered(self, row_id: int, status_code: int | None = 200) -> bool:
        result = await self._store._execute(self._sql.delivered, row_id, status_code)
        return result.endswith(" 1")

    async def record_failed_try(
        self, row_id: int, status_code: int | None, error: str | None,
        next_try_at: datetime, *, tries: int | None = None,
    ) -> bool:
        result = await self._store._execute(
            self._sql.failed_try, row_id, status_code, clip(error), next_try_at, tries
        )
        return result.endswith(" 1")

    async def mark_failed(
        self, row_id: int, status_code: int | None, error: str | None, *,
        tries: int | None = None,
    ) -> bool:
        result = await self._store._execute(
            self._sql.mark_failed, row_id, status_code, clip(error), tries
        )
        return result.endswith(" 1")

    async def record_tries(self, results: Sequence[TryResult]) -> None:
        """Record many finished tries in one short transaction."""
        if not results:
            return
        async with self._store._tx() as conn:
            await self._record(conn, results)

    async def _record(self, conn: asyncpg.Connection, results: Sequence[TryResult]) -> None:
        if not results:
            return
        sql = self._sql
        delivered = [r for r in results if r.outcome == "delivered"]
        retry = [r for r in results if r.outcome == "retry"]
        failed = [r for r in results if r.outcome == "failed"]
        if delivered:
            await conn.execute(
                sql.delivered_many,
                [r.id for r in delivered],
                [r.status_code or self.spec.delivered_code for r in delivered],
            )
        if retry:
            await conn.execute(
                sql.failed_tries,
                [r.id for r in retry], [r.tries for r in retry],
                [r.status_code for r in retry], [clip(r.error) for r in retry],
                [r.next_try_at for r in retry],
            )
        if failed:
            await conn.execute(
                sql.mark_failed_many,
                [r.id for r in failed], [r.tries for r in failed],
                [r.status_code for r in failed], [clip(r.error) for r in failed],
            )
        if self._log_tries is not None:
            await self._log_tries(conn, results)

    async def release(
        self, row_id: int, tries: int, *, undo_try: bool, error: str | None = None
    ) -> bool:
        """Hand a claimed row back so any deliverer takes it at once (``undo_try``: nothing
        was sent, so the try does not count)."""
        result = await self._store._execute(
            self._sql.release, row_id, tries, undo_try, clip(error)
        )
        return result.endswith(" 1")

    async def expire(
        self, max_age_seconds: float, now: datetime | None = None
    ) -> list[ExpiredEvent]:
        """Mark pending rows older than ``max_age_seconds`` failed (with a reason), except
        those whose final try is scheduled or in flight; returns them."""
        async with self._store._tx() as conn:
            rows = await conn.fetch(self._sql.expire, float(max_age_seconds), now)
        return [
            ExpiredEvent(r["id"], r["account_id"], r["monitor_id"],
                         (r["last_error"] or "").startswith("gave up"))
            for r in rows
        ]

    async def stats(self) -> tuple[int, float]:
        """(pending rows, age in seconds of the oldest pending one; 0 when none)."""
        row = await self._store._fetchrow(self._sql.stats)
        assert row is not None
        return int(row["depth"]), float(row["oldest"])

    @contextlib.asynccontextmanager
    async def listen(self, on_notify: Callable[[], None]) -> AsyncIterator[asyncpg.Connection]:
        """LISTEN on the spec's channel for the life of the context; ``on_notify`` runs (on
        the event loop) for every notification. Yields the listening connection so the
        caller can see it close (``is_closed()``) and listen again."""
        channel = self.spec.notify_channel

        def callback(*_: Any) -> None:
            on_notify()

        async with self._store._conn() as conn:
            await conn.add_listener(channel, callback)
            try:
                yield conn
            finally:
                if not is_closed(conn):
                    with contextlib.suppress(Exception):
                        await conn.remove_listener(channel, callback)


# last_error is for people reading the log; a receiver's error page must not bloat the row.
_MAX_ERROR = 500


def clip(error: str | None) -> str | None:
    """``error`` fit for a log column: no NUL (PostgreSQL text cannot hold it), at most
    500 characters."""
    if error is None:
        return None
    error = error.replace("\x00", "")
    return error if len(error) <= _MAX_ERROR else error[: _MAX_ERROR - 1] + "…"
