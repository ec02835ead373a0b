"""Notification channels and their queue: the store side (docs/notifications.md).

- Channels are rows of ``notification_channels`` owned by an account; every read and write
  names the account, so another account's channel is simply not found.
- :func:`queue_notifications` runs in the transaction of the state change that queued the
  webhook (engine/db/probing.py): one row per matching channel, so a notification is never
  queued without its state change, nor lost after it.
- The rows go through the shared outbox (:mod:`engine.db.outbox`), ordered per channel. A
  channel's alert-storm window is kept on its row and moved only by claims (one at a time
  per channel), never by the state changes: the first ``group_max`` rows claimed in a window
  go alone, a later one is held until the window's end and then claimed with every row of the
  channel queued before it, as one digest (:class:`NotificationQueue`).
- Every try is logged in ``notification_deliveries`` in the transaction that records it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from engine.db.base import StoreBase
from engine.db.outbox import OutboxQueue, QueueSpec, TryResult, clip
from engine.runtime.errors import NotFound
from engine.runtime.secretbox import SecretUnreadable

CHANNEL_NOTIFICATIONS = "upwatch_notifications"  # payload: '' (notifications were queued)

_CHANNEL_COLUMNS = "id, account_id, name, url, events, monitor_ids, is_enabled, created_at"

SQL_INSERT_CHANNEL = f"""
INSERT INTO notification_channels (account_id, name, url, events, monitor_ids, is_enabled)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING {_CHANNEL_COLUMNS}
"""
SQL_LIST_CHANNELS = f"""
SELECT {_CHANNEL_COLUMNS} FROM notification_channels WHERE account_id = $1 ORDER BY id
"""
SQL_GET_CHANNEL = f"""
SELECT {_CHANNEL_COLUMNS} FROM notification_channels WHERE id = $1 AND account_id = $2
"""
SQL_UPDATE_CHANNEL = f"""
UPDATE notification_channels
SET name = $3, url = $4, events = $5, monitor_ids = $6, is_enabled = $7
WHERE id = $1 AND account_id = $2
RETURNING {_CHANNEL_COLUMNS}
"""
SQL_DELETE_CHANNEL = "DELETE FROM notification_channels WHERE id = $1 AND account_id = $2"
SQL_OWN_MONITORS = """
SELECT id FROM monitors WHERE account_id = $1 AND id = ANY($2::bigint[])
"""

# One event of a state change to every channel that takes it, in one statement and without
# locking the channels (a storm's transitions must not queue up behind one row): the
# alert-storm window is the sender's business, decided when a channel's row is claimed. One
# NOTIFY when anything was queued. $1 account, $2 event, $3 monitor, $4 check, $5 webhook
# body, $6 failures began.
SQL_QUEUE_NOTIFICATIONS = """
WITH ins AS (
    INSERT INTO notification_events (account_id, channel_id, monitor_id, check_id, event, body,
                                     identifier, since)
    SELECT $1, c.id, $3, $4, $2, $5, m.identifier, $6
    FROM notification_channels c LEFT JOIN monitors m ON m.id = $3
    WHERE c.account_id = $1 AND c.is_enabled AND $2 = ANY(c.events)
      AND (c.monitor_ids IS NULL OR $3 = ANY(c.monitor_ids))
    ORDER BY c.id
    RETURNING 1
)
SELECT q.queued,
       CASE WHEN q.queued > 0
            THEN (SELECT 1 FROM pg_notify('upwatch_notifications', '')) END AS notified
FROM (SELECT count(*) AS queued FROM ins) q
"""

# The alert-storm window, in the claim's transaction. The heads a claim chose, with their
# channel's window (locked: one claim at a time moves a channel's window). $1: head ids.
SQL_WINDOW_OF_HEADS = """
SELECT e.id, e.channel_id, e.group_until, e.created_at, c.group_until AS window_until,
       c.group_sent, coalesce($2::timestamptz, now()) AS now
FROM notification_events e JOIN notification_channels c ON c.id = e.channel_id
WHERE e.id = ANY($1::bigint[])
ORDER BY c.id
FOR NO KEY UPDATE OF c
"""
# A head sent on its own: it opens the channel's window or counts in it.
SQL_COUNT_IN_WINDOW = """
UPDATE notification_channels SET group_until = $2, group_sent = $3 WHERE id = $1
"""
# A head past the window's first group_max: it waits for the window's end, as the first
# row of that window's digest.
SQL_HOLD_FOR_DIGEST = """
UPDATE notification_events SET group_until = $2, next_try_at = $2
WHERE id = $1 AND status = 'pending'
"""
# A due digest: its head and every pending row of the channel queued before the window's
# end, marked as the window's. $1 head, $2 channel, $3 window end.
SQL_DIGEST_MEMBERS = """
UPDATE notification_events SET group_until = $3
WHERE channel_id = $2 AND status = 'pending' AND id <> $1 AND created_at <= $3
  AND id IN (SELECT id FROM notification_events
             WHERE channel_id = $2 AND status = 'pending' AND id <> $1
             FOR UPDATE SKIP LOCKED)
RETURNING id
"""

_EXPIRE_REASON = """CASE
        WHEN NOT c.is_enabled
            THEN 'expired: the channel was disabled; last try: '
                 || coalesce(w.last_error, 'none')
        WHEN w.tries = 0
            THEN 'expired after 24 h before any try'
        ELSE 'gave up after 24 h; last try: ' || coalesce(w.last_error, 'no answer')
    END"""

# One log row per try of a message: a digest's rows share one try, logged once (by its
# first row) with no monitor.
SQL_LOG_TRIES = """
INSERT INTO notification_deliveries (channel_id, event_id, event, monitor_id, attempt,
                                     delivered, detail)
SELECT DISTINCT ON (e.channel_id, coalesce(e.group_until, 'infinity'::timestamptz),
                    CASE WHEN e.group_until IS NULL THEN e.id END)
       e.channel_id, e.id,
       CASE WHEN e.group_until IS NULL THEN e.event ELSE 'digest' END,
       CASE WHEN e.group_until IS NULL THEN e.monitor_id END,
       v.tries, v.delivered, v.detail
FROM unnest($1::bigint[], $2::int[], $3::bool[], $4::text[]) AS v(id, tries, delivered, detail)
JOIN notification_events e ON e.id = v.id
ORDER BY e.channel_id, coalesce(e.group_until, 'infinity'::timestamptz),
         CASE WHEN e.group_until IS NULL THEN e.id END, e.id
"""

SQL_LIST_DELIVERIES = """
SELECT d.id, d.event, d.monitor_id, d.attempt, d.delivered, d.detail, d.created_at
FROM notification_deliveries d
JOIN notification_channels c ON c.id = d.channel_id
WHERE d.channel_id = $1 AND c.account_id = $2
  AND ($3::bigint IS NULL OR d.id < $3)
ORDER BY d.id DESC
LIMIT $4
"""


@dataclass(frozen=True, slots=True)
class Channel:
    id: int
    account_id: int
    name: str
    url: str
    events: list[str]
    monitor_ids: list[int] | None
    is_enabled: bool
    created_at: datetime

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> Channel:
        ids = row["monitor_ids"]
        return cls(
            id=row["id"], account_id=row["account_id"], name=row["name"], url=row["url"],
            events=list(row["events"]), monitor_ids=None if ids is None else list(ids),
            is_enabled=row["is_enabled"], created_at=row["created_at"],
        )


@dataclass(frozen=True, slots=True)
class QueuedNotification:
    """One queued row: one event for one channel."""

    id: int
    tries: int
    monitor_id: int
    event: str
    body: bytes
    identifier: str | None
    since: datetime | None


@dataclass(frozen=True, slots=True)
class NotificationItem:
    """One try of one message: a single event, or a digest of several (``rows``, in the
    order they were queued). ``id``, ``tries``, ``monitor_id`` and ``created_at`` are the
    first row's, which the retry policy and the log lines use."""

    id: int
    account_id: int
    channel_id: int
    channel_name: str
    url: str
    tries: int
    monitor_id: int
    created_at: datetime
    claimed_at: datetime
    group_until: datetime | None
    rows: tuple[QueuedNotification, ...] = field(default=())

    @property
    def share(self) -> int:
        return self.channel_id

    @property
    def is_digest(self) -> bool:
        return self.group_until is not None

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> NotificationItem:
        one = QueuedNotification(
            id=row["id"], tries=row["tries"], monitor_id=row["monitor_id"], event=row["event"],
            body=bytes(row["body"]), identifier=row["identifier"], since=row["since"],
        )
        return cls(
            id=row["id"], account_id=row["account_id"], channel_id=row["channel_id"],
            channel_name=row["name"], url=row["url"], tries=row["tries"],
            monitor_id=row["monitor_id"], created_at=row["created_at"],
            claimed_at=row["claimed_at"], group_until=row["group_until"], rows=(one,),
        )


def combine(items: Sequence[NotificationItem]) -> list[NotificationItem]:
    """One item per message: the claimed rows of one channel's digest (same
    ``group_until``) become one item, in id order."""
    singles: list[NotificationItem] = []
    groups: dict[tuple[int, datetime], list[NotificationItem]] = {}
    for item in sorted(items, key=lambda i: i.id):
        if item.group_until is None:
            singles.append(item)
        else:
            groups.setdefault((item.channel_id, item.group_until), []).append(item)
    out = list(singles)
    for members in groups.values():
        head = members[0]
        out.append(dataclasses.replace(
            head, rows=tuple(row for m in members for row in m.rows)))
    return sorted(out, key=lambda i: i.id)


NOTIFICATION_QUEUE: QueueSpec[NotificationItem] = QueueSpec(
    table="notification_events",
    notify_channel=CHANNEL_NOTIFICATIONS,
    order_key="channel_id",
    # Shares by channel, not account: a channel has one try in flight at most (its order),
    # and an account's dead mail server must not take its chat's slot.
    share_key="channel_id",
    target_join="JOIN notification_channels c ON c.id = e.channel_id",
    target_ready="c.is_enabled",
    take_from="notification_channels c",
    take_where="c.id = w.channel_id",
    item_columns="""w.id, w.account_id, w.channel_id, w.monitor_id, w.event, w.body,
          w.identifier, w.since, w.group_until, w.tries, w.created_at, c.url, c.name""",
    expire_reason_sql=_EXPIRE_REASON,
    item=NotificationItem.from_row,
    group_column="group_until",
)


async def _log_tries(conn: asyncpg.Connection, results: Sequence[TryResult]) -> None:
    await conn.execute(
        SQL_LOG_TRIES,
        [r.id for r in results], [r.tries for r in results],
        [r.outcome == "delivered" for r in results],
        [clip(r.error) if r.outcome != "delivered" else "delivered" for r in results],
    )


class NotificationQueue(OutboxQueue[NotificationItem]):
    """The notification table's outbox: claims come back one item per message, and each
    channel's alert-storm window is applied as its rows are claimed (the channel's rows are
    claimed one at a time, oldest first, so the window sees them in order):

    - a head queued after the channel's window (or with none) opens one of
      ``grouping.seconds`` from its own queue time, and goes alone;
    - of the heads queued within the window, the first ``grouping.max_single`` go alone;
    - a later one is held until the window's end (at once if that has passed); then it is
      claimed with every row of the channel queued before that end, as one digest.
    """

    def __init__(self, spec: QueueSpec[NotificationItem], store: NotificationsMixin,
                 **kwargs: Any) -> None:
        super().__init__(spec, store, **kwargs)
        self._owner = store
        # Monotonic time the earliest held head is due (None: none held since asked).
        self._held_due: float | None = None

    def held_for(self) -> float | None:
        due, self._held_due = self._held_due, None
        return None if due is None else max(0.0, due - time.monotonic())

    async def claim(self, *args: Any, **kwargs: Any) -> list[NotificationItem]:
        items = combine(await super().claim(*args, **kwargs))
        # The URL decrypted for the sender; one this node's key cannot read is left empty,
        # and the sender fails the try saying why (retried like any failed try).
        return [dataclasses.replace(i, url=self._owner.channel_url(i.url) or "")
                for i in items]

    async def _expand(
        self, conn: asyncpg.Connection, heads: list[int], now: datetime | None
    ) -> list[int]:
        grouping = self._owner.notification_grouping
        window = timedelta(seconds=grouping.seconds)
        taken: list[int] = []
        for row in await conn.fetch(SQL_WINDOW_OF_HEADS, heads, now):
            head, channel, digest = row["id"], row["channel_id"], row["group_until"]
            if digest is None:
                # Windows are anchored at the events' times, not at the claims': sends that
                # lag behind a storm do not stretch its window.
                at, until, sent = row["created_at"], row["window_until"], row["group_sent"]
                if until is None or until <= at:
                    until, sent = at + window, 0
                if sent < grouping.max_single:
                    await conn.execute(SQL_COUNT_IN_WINDOW, channel, until, sent + 1)
                    taken.append(head)
                    continue
                await conn.execute(SQL_HOLD_FOR_DIGEST, head, until)
                if until > row["now"]:
                    due = time.monotonic() + (until - row["now"]).total_seconds()
                    if self._held_due is None or due < self._held_due:
                        self._held_due = due
                    continue  # held until the window's end
                digest = until
            # A held head whose window has ended: the digest.
            taken.append(head)
            taken += [r["id"] for r in await conn.fetch(
                SQL_DIGEST_MEMBERS, head, channel, digest)]
        return taken


@dataclass(frozen=True, slots=True)
class Delivery:
    """One try as ``GET .../deliveries`` lists it."""

    id: int
    event: str
    monitor_id: int | None
    attempt: int
    delivered: bool
    detail: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Grouping:
    """A channel's alert-storm window: seconds (already scaled) and events sent one by one."""

    seconds: float = 30.0
    max_single: int = 5


async def queue_notifications(
    conn: asyncpg.Connection,
    *,
    account_id: int,
    monitor_id: int,
    check_id: int | None,
    event: str,
    body: bytes,
    since: datetime | None,
) -> int:
    """Queue ``event`` for every enabled channel of the account that takes it, on ``conn``
    (the state change's transaction); returns how many rows were queued."""
    row = await conn.fetchrow(
        SQL_QUEUE_NOTIFICATIONS, account_id, event, monitor_id, check_id, body, since
    )
    return int(row["queued"]) if row is not None else 0


class NotificationsMixin(StoreBase):
    # The channels' alert-storm window, set once at start-up from the settings
    # (UPWATCH_NOTIFY_GROUP_SECONDS x time scale, UPWATCH_NOTIFY_GROUP_MAX).
    notification_grouping: Grouping = Grouping()

    @property
    def notification_queue(self) -> NotificationQueue:
        queue: NotificationQueue | None = self.__dict__.get("_notification_queue")
        if queue is None:
            queue = NotificationQueue(NOTIFICATION_QUEUE, self, log_tries=_log_tries)
            self.__dict__["_notification_queue"] = queue
        return queue

    # --- channels --------------------------------------------------------------------------
    # URLs are encrypted at rest with the installation's key (engine/runtime/secretbox.py), as the
    # account's webhook URL is: they hold passwords and tokens.

    def channel_url(self, stored: str) -> str | None:
        """A stored channel URL in clear; None when this node's key cannot decrypt it. A
        value with "://" was written in clear (a Fernet token never contains it)."""
        if "://" in stored:
            return stored
        try:
            return self.secrets.decrypt(stored)
        except SecretUnreadable:
            return None

    def _channel(self, row: asyncpg.Record) -> Channel:
        channel = Channel.from_row(row)
        # Unreadable here: shown as an unusable URL (masked whole), never as ciphertext.
        url = self.channel_url(channel.url)
        return dataclasses.replace(channel, url=url if url is not None else "unreadable://")

    async def create_channel(
        self, account_id: int, *, name: str, url: str, events: Sequence[str],
        monitor_ids: Sequence[int] | None, is_enabled: bool,
    ) -> Channel:
        row = await self._fetchrow(
            SQL_INSERT_CHANNEL, account_id, name, self.secrets.encrypt(url), list(events),
            None if monitor_ids is None else list(monitor_ids), is_enabled,
        )
        assert row is not None
        return self._channel(row)

    async def list_channels(self, account_id: int) -> list[Channel]:
        return [self._channel(r) for r in await self._fetch(SQL_LIST_CHANNELS, account_id)]

    async def get_channel(self, account_id: int, channel_id: int) -> Channel:
        """The account's channel; NotFound for an unknown id or another account's."""
        row = await self._fetchrow(SQL_GET_CHANNEL, channel_id, account_id)
        if row is None:
            raise NotFound("Notification channel not found.")
        return self._channel(row)

    async def update_channel(
        self, account_id: int, channel_id: int, *, name: str, url: str, events: Sequence[str],
        monitor_ids: Sequence[int] | None, is_enabled: bool,
    ) -> Channel:
        row = await self._fetchrow(
            SQL_UPDATE_CHANNEL, channel_id, account_id, name, self.secrets.encrypt(url),
            list(events),
            None if monitor_ids is None else list(monitor_ids), is_enabled,
        )
        if row is None:
            raise NotFound("Notification channel not found.")
        return self._channel(row)

    async def delete_channel(self, account_id: int, channel_id: int) -> None:
        """Delete the channel with its queued rows and its log; NotFound as for get."""
        status = await self._execute(SQL_DELETE_CHANNEL, channel_id, account_id)
        if not status.endswith(" 1"):
            raise NotFound("Notification channel not found.")

    async def own_monitor_ids(self, account_id: int, ids: Sequence[int]) -> set[int]:
        """Those of ``ids`` that are monitors of the account."""
        rows = await self._fetch(SQL_OWN_MONITORS, account_id, list(ids))
        return {r["id"] for r in rows}

    async def list_deliveries(
        self, account_id: int, channel_id: int, *, limit: int = 100,
        before_id: int | None = None,
    ) -> list[Delivery]:
        """The channel's tries, newest first; NotFound for another account's channel."""
        await self.get_channel(account_id, channel_id)
        rows = await self._fetch(SQL_LIST_DELIVERIES, channel_id, account_id, before_id, limit)
        return [Delivery(**{k: r[k] for k in Delivery.__slots__}) for r in rows]
