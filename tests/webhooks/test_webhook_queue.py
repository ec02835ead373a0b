"""The durable webhook queue in PostgreSQL: claims, per-monitor order, leases, stale
results, expiry and the delivery log queries."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from engine.db.store import Store
from engine.db.webhook_queue import NotRetryable, insert_event
from engine.domain import payloads
from engine.runtime.errors import NotFound

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
HOUR = 3600.0
DAY = 86400.0


async def queue(
    store: Store, account_id: int, monitor_id: int, *, parent_id: int | None = None,
    event: str = payloads.DOWNTIME,
) -> int:
    body = payloads.downtime(
        payloads.MonitorRef(monitor_id, "https://example.com/", "example"),
        last_check_at=NOW, error="HTTP 500", http_status_code=500,
        detected_by="eu", verified_via="us",
    )
    async with store.pool.acquire() as conn, conn.transaction():
        return await insert_event(
            conn, account_id=account_id, monitor_id=monitor_id, check_id=None,
            event=event, body=body, parent_id=parent_id,
        )


async def row(store: Store, event_id: int) -> dict:
    r = await store.pool.fetchrow("SELECT * FROM webhook_events WHERE id = $1", event_id)
    assert r is not None
    return dict(r)


@pytest.fixture
async def acc(store: Store) -> int:
    account, _ = await store.create_account("hooks", webhook_url="http://127.0.0.1:9/hook")
    return account.id


async def test_claim_takes_only_the_oldest_pending_event_of_each_monitor(
    store: Store, acc: int
) -> None:
    a1, a2 = await queue(store, acc, 1), await queue(store, acc, 1)
    b1 = await queue(store, acc, 2)
    claimed = await store.webhook_queue.claim(10, 60)
    assert [e.id for e in claimed] == [a1, b1]
    first = claimed[0]
    assert first.tries == 1 and first.parent_webhook == a1
    assert first.webhook_url == "http://127.0.0.1:9/hook" and first.token.startswith("uw_")
    assert first.body == bytes((await row(store, a1))["body"])
    # Leased: invisible now, and a2 stays behind a1 although a1 is not due.
    assert await store.webhook_queue.claim(10, 60) == []
    # a1 delivered: a2 is now the head of monitor 1.
    assert await store.webhook_queue.record_delivered(a1, 200)
    assert [e.id for e in await store.webhook_queue.claim(10, 60)] == [a2]


async def test_a_failed_try_holds_back_its_monitor_only(store: Store, acc: int) -> None:
    a1, a2 = await queue(store, acc, 1), await queue(store, acc, 1)
    (c,) = await store.webhook_queue.claim(1, 60)
    assert c.id == a1
    await store.webhook_queue.record_failed_try(
        a1, 500, "HTTP 500", NOW + timedelta(days=1000), tries=1)
    b1 = await queue(store, acc, 2)
    assert [e.id for e in await store.webhook_queue.claim(10, 60)] == [b1]
    assert (await row(store, a2))["tries"] == 0


async def test_a_lapsed_lease_comes_back_as_the_next_try_of_the_same_event(
    store: Store, acc: int
) -> None:
    e = await queue(store, acc, 1)
    (first,) = await store.webhook_queue.claim(1, 0.05)
    later = first.claimed_at + timedelta(seconds=1)
    (second,) = await store.webhook_queue.claim(1, 60, later)
    assert (second.id, second.tries) == (e, 2)
    # The first deliverer's late result must not overwrite the second try's schedule.
    assert not await store.webhook_queue.record_failed_try(e, 500, "late", NOW, tries=1)
    assert await store.webhook_queue.record_failed_try(e, 502, "HTTP 502", NOW, tries=2)
    r = await row(store, e)
    assert (r["tries"], r["last_status_code"], r["next_try_at"]) == (2, 502, NOW)


async def test_concurrent_claims_never_hand_out_one_event_twice(store: Store, acc: int) -> None:
    ids = [await queue(store, acc, m) for m in range(1, 41)]
    batches = await asyncio.gather(*(store.webhook_queue.claim(5, 60) for _ in range(12)))
    got = [e.id for b in batches for e in b]
    assert len(got) == len(set(got)) == 40
    assert sorted(got) == ids


async def test_only_accounts_with_a_url_and_only_due_events_are_claimed(
    store: Store, acc: int
) -> None:
    silent, _ = await store.create_account("no url")
    hidden = await queue(store, silent.id, 7)
    due = await queue(store, acc, 1)
    assert [e.id for e in await store.webhook_queue.claim(10, 60)] == [due]
    await store.set_webhook_url(silent.id, "http://127.0.0.1:9/")
    assert [e.id for e in await store.webhook_queue.claim(10, 60)] == [hidden]


async def test_per_account_limit_leaves_room_for_other_accounts(store: Store, acc: int) -> None:
    other, _ = await store.create_account("b", webhook_url="http://127.0.0.1:9/b")
    for m in range(1, 11):
        await queue(store, acc, m)
    b = await queue(store, other.id, 100)
    claimed = await store.webhook_queue.claim(4, 60, per_share_limit=3, in_flight={acc: 1})
    assert sum(e.account_id == acc for e in claimed) == 2
    assert b in [e.id for e in claimed]
    # A per-account override (a receiver that stopped answering) lowers its share.
    claimed = await store.webhook_queue.claim(
        10, 60, per_share_limit=8, in_flight={acc: 2}, share_limits={acc: 3}
    )
    assert len(claimed) == 1 and claimed[0].account_id == acc


async def test_an_account_that_may_exceed_its_limit_gets_only_the_slots_left_over(
    store: Store, acc: int
) -> None:
    other, _ = await store.create_account("b", webhook_url="http://127.0.0.1:9/b")
    for m in range(1, 11):
        await queue(store, acc, m)
    b = await queue(store, other.id, 100)
    # At its limit, acc gets nothing while b's event waits; then the slots that are left.
    claimed = await store.webhook_queue.claim(8, 60, per_share_limit=3, in_flight={acc: 3},
                                    may_exceed={acc})
    assert claimed[0].id == b
    assert [e.account_id for e in claimed[1:]] == [acc] * 7
    # Without may_exceed the limit holds even though slots are free.
    assert await store.webhook_queue.claim(8, 60, per_share_limit=3, in_flight={acc: 3}) == []


async def test_release_hands_a_claim_back_at_once(store: Store, acc: int) -> None:
    e = await queue(store, acc, 1)
    (c,) = await store.webhook_queue.claim(1, 600)
    assert await store.webhook_queue.release(e, c.tries, undo_try=True)
    (again,) = await store.webhook_queue.claim(1, 600)
    assert again.tries == 1
    assert await store.webhook_queue.release(e, again.tries, undo_try=False, error="shutdown")
    (third,) = await store.webhook_queue.claim(1, 600)
    assert third.tries == 2 and (await row(store, e))["last_error"] == "shutdown"


async def test_expiry_fails_old_events_but_not_a_try_in_flight(store: Store, acc: int) -> None:
    silent, _ = await store.create_account("no url")
    never = await queue(store, silent.id, 7)
    waiting = await queue(store, acc, 1)
    behind = await queue(store, acc, 1)
    in_flight = await queue(store, acc, 2)
    (c1, c2) = await store.webhook_queue.claim(2, 2 * DAY)
    assert {c1.id, c2.id} == {waiting, in_flight}
    await store.webhook_queue.record_failed_try(waiting, 503, "HTTP 503", c1.claimed_at, tries=1)
    # 25 h later: all of them are past 24 h; the one whose lease runs past its deadline is
    # still being tried and is left to its deliverer.
    later = c1.claimed_at + timedelta(hours=25)
    swept = await store.webhook_queue.expire(DAY, later)
    expired = {e.id for e in swept}
    assert expired == {never, waiting, behind}
    # Only the tried one gave up (and is counted so); the others expired.
    assert {e.id for e in swept if e.gave_up} == {waiting}
    assert (await row(store, never))["last_error"] == "expired: no webhook URL was set within 24 h"
    assert (await row(store, waiting))["last_error"] == "gave up after 24 h; last try: HTTP 503"
    assert (await row(store, behind))["last_error"] == "expired after 24 h before any try"
    assert [(await row(store, i))["status"] for i in sorted(expired)] == ["failed"] * 3
    assert (await row(store, in_flight))["status"] == "pending"
    # Young events are untouched.
    assert await store.webhook_queue.expire(DAY) == []


async def test_a_200_is_recorded_whatever_happened_meanwhile(store: Store, acc: int) -> None:
    e = await queue(store, acc, 1)
    (_c,) = await store.webhook_queue.claim(1, 60)
    assert await store.webhook_queue.mark_failed(e, 500, "gave up", tries=1)
    assert await store.webhook_queue.record_delivered(e, 200)
    r = await row(store, e)
    assert (r["status"], r["last_status_code"], r["last_error"]) == ("delivered", 200, None)
    assert r["delivered_at"] is not None
    assert not await store.webhook_queue.record_delivered(e, 200)


async def test_queue_stats_count_pending_events(store: Store, acc: int) -> None:
    assert await store.webhook_queue.stats() == (0, 0.0)
    await queue(store, acc, 1)
    e = await queue(store, acc, 2)
    await store.webhook_queue.record_delivered(e)
    depth, oldest = await store.webhook_queue.stats()
    assert depth == 1 and oldest >= 0


async def test_listen_wakes_on_every_queued_event(store: Store, acc: int) -> None:
    woke = asyncio.Event()
    async with store.webhook_queue.listen(woke.set):
        await queue(store, acc, 1)
        await asyncio.wait_for(woke.wait(), 5)


async def test_delivery_log_lists_newest_first_filters_and_pages(store: Store, acc: int) -> None:
    ids = [await queue(store, acc, m) for m in (1, 2, 3, 4)]
    await store.webhook_queue.record_delivered(ids[1])
    await store.webhook_queue.mark_failed(ids[2], None, "refused")
    log = await store.list_webhooks(acc)
    assert [r.id for r in log] == ids[::-1]
    assert [r.id for r in await store.list_webhooks(acc, status="delivered")] == [ids[1]]
    assert [r.id for r in await store.list_webhooks(acc, status="failed")] == [ids[2]]
    assert [r.id for r in await store.list_webhooks(acc, status="pending")] == [ids[3], ids[0]]
    page1 = await store.list_webhooks(acc, limit=3)
    page2 = await store.list_webhooks(acc, limit=3, before_id=page1[-1].id)
    assert [r.id for r in page1 + page2] == ids[::-1]
    other, _ = await store.create_account("other")
    assert await store.list_webhooks(other.id) == []
    with pytest.raises(ValueError):
        await store.list_webhooks(acc, status="lost")


async def test_retry_requeues_a_failed_event_of_the_account_only(store: Store, acc: int) -> None:
    e = await queue(store, acc, 1)
    (_c,) = await store.webhook_queue.claim(1, 60)
    with pytest.raises(NotRetryable) as pending:
        await store.retry_webhook(acc, e)
    assert pending.value.status == "pending"
    await store.webhook_queue.mark_failed(e, 500, "HTTP 500", tries=1)
    other, _ = await store.create_account("other")
    with pytest.raises(NotFound):
        await store.retry_webhook(other.id, e)
    with pytest.raises(NotFound):
        await store.retry_webhook(acc, e + 1000)
    woke = asyncio.Event()
    async with store.webhook_queue.listen(woke.set):
        record = await store.retry_webhook(acc, e)
        await asyncio.wait_for(woke.wait(), 5)
    assert (record.status, record.tries) == ("pending", 1)
    (again,) = await store.webhook_queue.claim(1, 60)
    assert (again.id, again.tries) == (e, 2)
    await store.webhook_queue.record_delivered(e)
    with pytest.raises(NotRetryable):
        await store.retry_webhook(acc, e)


async def test_retry_needs_a_webhook_url(store: Store) -> None:
    silent, _ = await store.create_account("no url")
    e = await queue(store, silent.id, 1)
    await store.webhook_queue.mark_failed(e, None, "expired")
    with pytest.raises(NotRetryable, match="no webhook URL"):
        await store.retry_webhook(silent.id, e)
