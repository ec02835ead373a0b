"""The notification queue on the shared outbox: rows queued in the state change's
transaction, the alert-storm window (first ``group_max`` one by one, the rest as one claimed
digest at the window's end), order per channel, and the words of a digest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from engine.db.notifications import Grouping, QueuedNotification, queue_notifications
from engine.db.outbox import TryResult
from engine.db.store import Store
from engine.delivery.notify import messages
from engine.domain import payloads

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
ALL = list(payloads.EVENTS)


def downtime_body(monitor_id: int, alias: str) -> bytes:
    return payloads.downtime(
        payloads.MonitorRef(monitor_id, f"https://{alias}.example.com/", alias),
        last_check_at=NOW, error="HTTP 503", http_status_code=503, detected_by="eu",
        verified_via="us",
    )


async def queue_down(store: Store, account_id: int, monitor_id: int, alias: str = "") -> int:
    async with store.pool.acquire() as conn, conn.transaction():
        return await queue_notifications(
            conn, account_id=account_id, monitor_id=monitor_id, check_id=None,
            event="downtime", body=downtime_body(monitor_id, alias or f"m{monitor_id}"),
            since=NOW,
        )


async def channel(store: Store, account_id: int, **kw: Any) -> int:
    c = await store.create_channel(
        account_id, name="c", url=kw.pop("url", "json://127.0.0.1:9/x"),
        events=kw.pop("events", ALL), monitor_ids=kw.pop("monitor_ids", None),
        is_enabled=kw.pop("is_enabled", True),
    )
    return c.id


async def test_the_first_events_of_a_window_go_at_once_and_the_rest_as_one_digest(
    store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    cid = await channel(store, acc.id)
    store.notification_grouping = Grouping(seconds=5.0, max_single=3)
    for m in range(1, 9):
        assert await queue_down(store, acc.id, m) == 1
    queue = store.notification_queue
    # Order per channel: one message at a time, oldest first.
    singles = []
    for _ in range(3):
        [item] = await queue.claim(10, 30.0)
        assert not item.is_digest and len(item.rows) == 1
        singles.append(item.monitor_id)
        await queue.record_tries([TryResult(item.id, item.tries, "delivered")])
    assert singles == [1, 2, 3]
    # The rest wait for the window's end...
    assert await queue.claim(10, 30.0) == []
    later = datetime.now(UTC) + timedelta(seconds=10)
    [digest] = await queue.claim(10, 30.0, now=later)
    # ...and come as one item, in the order they were queued.
    assert digest.is_digest and [r.monitor_id for r in digest.rows] == [4, 5, 6, 7, 8]
    assert digest.channel_id == cid
    await queue.record_tries([TryResult(r.id, r.tries, "retry", None, "HTTP 500",
                                        later) for r in digest.rows])
    # A failed digest is retried as the same digest; its try is logged once.
    [again] = await queue.claim(10, 30.0, now=later + timedelta(seconds=1))
    assert [r.id for r in again.rows] == [r.id for r in digest.rows] and again.tries == 2
    await queue.record_tries([TryResult(r.id, r.tries, "delivered") for r in again.rows])
    log = await store.list_deliveries(acc.id, cid)
    assert [(d.event, d.monitor_id, d.attempt, d.delivered) for d in log] == [
        ("digest", None, 2, True), ("digest", None, 1, False),
        ("downtime", 3, 1, True), ("downtime", 2, 1, True), ("downtime", 1, 1, True),
    ]
    assert log[1].detail == "HTTP 500"


async def test_a_channel_takes_only_its_events_and_monitors_and_only_while_enabled(
    store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    other, _ = await store.create_account("other")
    await channel(store, acc.id, monitor_ids=[1])
    await channel(store, acc.id, events=["uptime_restored"])
    await channel(store, acc.id, is_enabled=False)
    await channel(store, other.id)
    assert await queue_down(store, acc.id, 1) == 1
    assert await queue_down(store, acc.id, 2) == 0


async def test_a_slow_channel_does_not_hold_another_back(
    store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    mail = await channel(store, acc.id)
    chat = await channel(store, acc.id)
    await queue_down(store, acc.id, 1)
    await queue_down(store, acc.id, 2)
    first = await store.notification_queue.claim(10, 30.0)
    # The head of each channel, both at once; the second rows wait behind their heads.
    assert sorted((i.channel_id, i.monitor_id) for i in first) == [(mail, 1), (chat, 1)]


def row(i: int, event: str = "downtime") -> QueuedNotification:
    return QueuedNotification(i, 1, i, event, downtime_body(i, f"site{i:03d}"),
                              f"ident{i}", NOW)


def test_a_digest_names_its_count_lists_the_first_and_says_how_many_more() -> None:
    rows = [row(i) for i in range(37)]
    msg = messages.render_digest(rows, "https://status.example.com")
    assert msg.title == "37 monitors down"
    assert "site000 (https://site000.example.com/): down since 2026-05-01 12:00:00 UTC" \
        in msg.body
    assert "site019" in msg.body and "site020" not in msg.body
    assert "… and 17 more" in msg.body


def test_one_event_reads_as_words_with_utc_times_regions_and_the_status_page() -> None:
    msg = messages.render(row(7), "https://status.example.com/")
    assert msg.title == "DOWN: site007"
    assert "is down since 2026-05-01 12:00:00 UTC" in msg.body
    assert "Reason: HTTP 503" in msg.body and "eu, confirmed from us" in msg.body
    assert "Status page: https://status.example.com/ident7" in msg.body
    restored = payloads.uptime_restored(
        payloads.MonitorRef(7, "https://x.example.com/", "x"), last_check_at=NOW,
        http_status_code=200, downtime_seconds=3725,
    )
    up = messages.render(QueuedNotification(8, 1, 7, "uptime_restored", restored, "i", None),
                         "https://s")
    assert up.title == "UP again: x" and "down for 1 h 02 min" in up.body
    due = payloads.certificate_renewal_due(
        payloads.MonitorRef(7, "https://x.example.com/", "x"), last_check_at=NOW,
        expires_in_days=12, issuer="R3", signature_algorithm="sha256",
        valid_from=NOW - timedelta(days=78), valid_to=NOW + timedelta(days=12),
    )
    cert = messages.render(
        QueuedNotification(9, 1, 7, "certificate_renewal_due", due, "i", None), "https://s")
    assert cert.title == "Certificate expires in 12 days: x"
    assert "Issuer: R3" in cert.body and "UTC" in cert.body
