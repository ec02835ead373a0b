"""The durable webhook queue: events are inserted in the transaction of the state change
that caused them (:func:`insert_event`); deliverers claim due events with
``FOR UPDATE SKIP LOCKED``, record each try, and the API reads the delivery log."""

from __future__ import annotations

import asyncpg

from engine.db.base import CHANNEL_WEBHOOKS, StoreBase

SQL_INSERT_EVENT = """
INSERT INTO webhook_events (account_id, monitor_id, check_id, event, parent_id, body)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id
"""


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


class WebhookQueueMixin(StoreBase):
    pass
