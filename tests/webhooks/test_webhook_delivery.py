"""The deliverer against a real local receiver (an aiohttp server on 127.0.0.1 that records
the raw body bytes and headers of every request and can answer 200, 500, a redirect, hang or
close the connection). Time runs fast through ``time_scale``; every wait is bounded and waits
for a condition."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from engine import USER_AGENT
from engine.db.store import Store
from engine.delivery import policy
from engine.delivery.webhooks import deliverer as deliverer_module
from engine.delivery.webhooks.signing import verify
from engine.domain import payloads
from engine.runtime.metrics import Metrics
from tests.support.metrics import sample
from tests.support.wait import wait_until
from tests.support.webhook_support import (
    NOW,
    SCALE,
    Hit,
    Receiver,
    downtime_body,
    make_settings,
    queue,
    row,
    running,
    status_is,
    tries_sample,
)


async def test_a_delivery_carries_the_headers_and_a_signature_of_the_raw_body(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    account, token = await store.create_account("a", webhook_url=receiver.url())
    opened = await queue(store, account.id, 1)
    restored_body = payloads.uptime_restored(
        payloads.MonitorRef(1, "https://example.com/", "example"),
        last_check_at=NOW, http_status_code=200, downtime_seconds=3725,
    )
    restored = await queue(
        store, account.id, 1, event=payloads.UPTIME_RESTORED, body=restored_body,
        parent_id=opened,
    )
    async with running(store, make_settings(tmp_path)):
        await wait_until(status_is(store, restored, "delivered"), what="both delivered")
    first, second = receiver.hits
    assert [first.event_id, second.event_id] == [opened, restored]
    for hit, parent in ((first, opened), (second, opened)):
        assert hit.headers["Content-Type"] == "application/json"
        assert hit.headers["User-Agent"] == USER_AGENT
        assert hit.headers["X-Service-Current-Try"] == "1"
        assert hit.headers["X-Service-Parent-Webhook"] == str(parent)
        signature = hit.headers["X-Service-Signature"]
        assert len(signature) == 40 and signature == signature.lower()
        assert verify(hit.body, token, signature)
        assert not verify(hit.body, token + "x", signature)
    # The exact stored bytes are what was sent (and signed).
    assert first.body == downtime_body(1)
    assert second.body == restored_body
    r = await row(store, opened)
    assert (r["tries"], r["last_status_code"], r["last_error"]) == (1, 200, None)
    assert r["delivered_at"] is not None


async def test_retries_keep_the_event_id_and_count_the_tries(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    account, token = await store.create_account("a", webhook_url=receiver.url())
    receiver.behaviour = lambda hit: "500" if hit.try_number < 4 else "ok"
    metrics = Metrics()
    event = await queue(store, account.id, 1)
    async with running(store, make_settings(tmp_path), metrics):
        await wait_until(status_is(store, event, "delivered"), what="delivered after three 500s")
    assert [h.event_id for h in receiver.hits] == [event] * 4
    assert [h.try_number for h in receiver.hits] == [1, 2, 3, 4]
    assert len({h.headers["X-Service-Signature"] for h in receiver.hits}) == 1
    assert all(verify(h.body, token, h.headers["X-Service-Signature"]) for h in receiver.hits)
    # Never earlier than the jittered back-off allows (10 s, 20 s, 40 s x time scale).
    for n, (a, b) in enumerate(itertools.pairwise(receiver.hits), start=1):
        assert b.at - a.at >= 0.8 * policy.nominal_delay(n) * SCALE - 0.002
    r = await row(store, event)
    assert (r["tries"], r["last_status_code"], r["last_error"]) == (4, 200, None)
    assert tries_sample(metrics, "http_error") == 3
    assert tries_sample(metrics, "delivered") == 1


async def test_a_failing_receiver_holds_back_later_events_of_that_monitor_only(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    account, _ = await store.create_account("a", webhook_url=receiver.url())
    failures = {"left": 4}

    def behaviour(hit: Hit) -> str:
        if hit.monitor_id == 1 and failures["left"] > 0:
            failures["left"] -= 1
            return "500"
        return "ok"

    receiver.behaviour = behaviour
    m1 = [await queue(store, account.id, 1) for _ in range(3)]
    m2 = await queue(store, account.id, 2)
    async with running(store, make_settings(tmp_path)):
        await wait_until(status_is(store, m1[-1], "delivered"), what="monitor 1 drained")
    monitor1 = [h.event_id for h in receiver.hits if h.monitor_id == 1]
    # Every try of an event came before any try of the next one: order held under failure.
    assert monitor1 == sorted(monitor1)
    assert [h.event_id for h in receiver.ok_hits() if h.monitor_id == 1] == m1
    # Monitor 2 was not held back by monitor 1's failing first event.
    ok_ids = [h.event_id for h in receiver.ok_hits()]
    assert ok_ids.index(m2) < ok_ids.index(m1[0])


async def test_two_deliverers_at_once_send_each_try_exactly_once(
    db_dsn: str, receiver: Receiver, tmp_path: Path
) -> None:
    stores = [await Store.connect(db_dsn, min_size=1, max_size=10) for _ in range(2)]
    try:
        store = stores[0]
        account, _ = await store.create_account("a", webhook_url=receiver.url())
        receiver.behaviour = lambda hit: "500" if hit.try_number == 1 else "ok"
        events = [await queue(store, account.id, m) for m in range(1, 31) for _ in range(2)]
        settings = make_settings(tmp_path, webhook_concurrency=4)
        async with running(stores[0], settings), running(stores[1], settings):
            await wait_until(
                lambda: len(receiver.ok_hits()) >= len(events), timeout=30, what="all delivered")
            # A moment for any duplicate to show up before the counts are taken.
            await wait_until(status_is(store, events[-1], "delivered"),
                             what="the last event delivered")
        seen = [(h.event_id, h.try_number) for h in receiver.hits]
        assert len(seen) == len(set(seen)) == 2 * len(events)
        assert {(e, n) for e in events for n in (1, 2)} == set(seen)
        for m in range(1, 31):
            ids = [h.event_id for h in receiver.hits if h.monitor_id == m]
            assert ids == sorted(ids)
        statuses = await store.pool.fetch("SELECT DISTINCT status, tries FROM webhook_events")
        assert [tuple(r) for r in statuses] == [("delivered", 2)]
    finally:
        for s in stores:
            await s.close()


async def test_a_redirect_is_not_followed_and_counts_as_a_failed_try(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    account, _ = await store.create_account("a", webhook_url=receiver.url())
    receiver.behaviour = lambda hit: "redirect"
    metrics = Metrics()
    event = await queue(store, account.id, 1)
    async with running(store, make_settings(tmp_path), metrics):

        async def redirected() -> bool:
            # ``tries`` counts a try when it is claimed, before it is sent: wait for the
            # second redirect to be answered and settled, not just claimed.
            if tries_sample(metrics, "redirect") < 2:
                return False
            r = await row(store, event)
            return r["last_status_code"] == 302

        await wait_until(redirected, what="a recorded redirect")
        r = await row(store, event)
        assert r["status"] == "pending"
        assert "redirect to /elsewhere not followed" in r["last_error"]
        receiver.behaviour = lambda hit: "ok"
        await wait_until(status_is(store, event, "delivered"), what="delivered once not redirected")
    assert all(h.path == "/hook" for h in receiver.hits)
    assert tries_sample(metrics, "redirect") >= 2


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_a_hanging_receiver_times_out_without_holding_back_another_account(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    slow, _ = await store.create_account("slow", webhook_url=receiver.url("/slow"))
    fast, _ = await store.create_account("fast", webhook_url=receiver.url("/fast"))
    receiver.behaviour = lambda hit: "hang" if hit.path == "/slow" else "ok"
    metrics = Metrics()
    stuck = await queue(store, slow.id, 1)
    async with running(store, make_settings(tmp_path, webhook_timeout=1.0), metrics):
        await wait_until(lambda: len(receiver.hits) == 1, what="the slow try")
        started = time.monotonic()
        other = await queue(store, fast.id, 2)
        await wait_until(status_is(store, other, "delivered"), what="the other account")
        # Delivered while the slow receiver still holds its try.
        assert time.monotonic() - started < 1.0
        assert (await row(store, stuck))["status"] == "pending"

        async def timed_out() -> bool:
            return "timed out" in ((await row(store, stuck))["last_error"] or "")

        await wait_until(timed_out, what="the timeout recorded")
        receiver.behaviour = lambda hit: "ok"
        await wait_until(status_is(store, stuck, "delivered"), what="the stuck event delivered")
    assert tries_sample(metrics, "timeout") >= 1


async def test_a_closed_connection_is_a_failed_try_logged_with_event_and_monitor(
    store: Store, receiver: Receiver, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    account, _ = await store.create_account("a", webhook_url=receiver.url())
    receiver.behaviour = lambda hit: "close" if hit.try_number == 1 else "ok"
    metrics = Metrics()
    event = await queue(store, account.id, 42)
    with caplog.at_level(logging.WARNING, logger="engine.delivery.webhooks.deliverer"):
        async with running(store, make_settings(tmp_path), metrics):
            await wait_until(status_is(store, event, "delivered"), what="the event delivered")
    assert [h.try_number for h in receiver.hits] == [1, 2]
    assert tries_sample(metrics, "connection_error") == 1
    lines = [r.getMessage() for r in caplog.records if "try 1 failed" in r.getMessage()]
    assert len(lines) == 1
    assert f"webhook {event} of monitor 42" in lines[0]
    assert "closed the connection" in lines[0]


async def test_private_addresses_are_refused_at_delivery_when_not_allowed(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    port = receiver.base.rsplit(":", 1)[1]
    literal, _ = await store.create_account("lit", webhook_url=f"http://127.0.0.1:{port}/x")
    named, _ = await store.create_account("dns", webhook_url=f"http://localhost:{port}/x")
    metrics = Metrics()
    events = [await queue(store, literal.id, 1), await queue(store, named.id, 2)]
    settings = make_settings(tmp_path, allow_private_targets=False)
    async with running(store, settings, metrics):

        async def refused() -> bool:
            rows = [await row(store, e) for e in events]
            return all(r["tries"] >= 1 and r["last_error"] for r in rows)

        await wait_until(refused, what="both refused")
    for e in events:
        r = await row(store, e)
        assert r["status"] == "pending" and r["last_status_code"] is None
        assert "non-public address" in r["last_error"] and "refused" in r["last_error"]
    assert receiver.hits == []
    assert tries_sample(metrics, "blocked") >= 2


async def test_an_account_without_a_url_keeps_its_events_until_one_is_set(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    silent, _ = await store.create_account("silent")
    control, _ = await store.create_account("control", webhook_url=receiver.url("/control"))
    kept = await queue(store, silent.id, 1)
    metrics = Metrics()
    async with running(store, make_settings(tmp_path), metrics):
        probe = await queue(store, control.id, 2)
        await wait_until(status_is(store, probe, "delivered"), what="the control event delivered")
        await wait_until(
            lambda: sample(metrics, "upwatch_webhook_queue_depth") == 1, what="gauge")
        r = await row(store, kept)
        assert (r["status"], r["tries"]) == ("pending", 0)
        await store.set_webhook_url(silent.id, receiver.url("/now"))
        await wait_until(status_is(store, kept, "delivered"), what="the held event delivered")
    (late,) = [h for h in receiver.hits if h.path == "/now"]
    assert (late.event_id, late.try_number) == (kept, 1)


async def test_undeliverable_events_end_failed_after_24h_times_scale(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    scale = 0.00002  # 24 h = 1.73 s, the back-off cap 72 ms
    silent, _ = await store.create_account("silent")
    broken, _ = await store.create_account("broken", webhook_url=receiver.url())
    receiver.behaviour = lambda hit: "500"
    metrics = Metrics()
    never = await queue(store, silent.id, 1)
    failing = await queue(store, broken.id, 2)
    started = time.monotonic()
    async with running(store, make_settings(tmp_path, time_scale=scale), metrics):
        await wait_until(status_is(store, never, "failed"), what="expiry")
        await wait_until(status_is(store, failing, "failed"), what="give-up")
    assert time.monotonic() - started >= 86400 * scale * 0.9
    r = await row(store, never)
    assert (r["tries"], r["last_error"]) == (0, "expired: no webhook URL was set within 24 h")
    r = await row(store, failing)
    assert r["tries"] >= 5 and r["last_status_code"] == 500
    assert r["last_error"].startswith("gave up after 24 h; last try: HTTP 500")
    assert [h.try_number for h in receiver.hits] == list(range(1, r["tries"] + 1))
    # Kept, not deleted.
    assert [x.id for x in await store.list_webhooks(broken.id, status="failed")] == [failing]
    # Counted just after the row is written.
    await wait_until(lambda: tries_sample(metrics, "gave_up") == 1, what="gave_up counted")
    assert tries_sample(metrics, "expired") == 1


async def test_a_crashed_deliverers_try_comes_back_after_its_lease_as_the_next_try(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    account, _ = await store.create_account("a", webhook_url=receiver.url())
    event = await queue(store, account.id, 1)
    # A deliverer claims the event and dies before recording anything.
    (claimed,) = await store.webhook_queue.claim(1, lease_seconds=0.5)
    claimed_at = time.monotonic()
    async with running(store, make_settings(tmp_path)):
        await wait_until(status_is(store, event, "delivered"),
                         what="delivered after the lease ran out")
    (hit,) = receiver.hits
    assert (hit.event_id, hit.try_number) == (event, claimed.tries + 1)
    assert hit.at - claimed_at >= 0.45


async def test_stopping_hands_an_in_flight_try_back_to_the_queue(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    account, _ = await store.create_account("a", webhook_url=receiver.url())
    receiver.behaviour = lambda hit: "hang" if hit.try_number == 1 else "ok"
    event = await queue(store, account.id, 1)
    settings = make_settings(tmp_path, time_scale=1.0, webhook_timeout=30.0)
    async with running(store, settings, drain_timeout=0.2):
        await wait_until(lambda: len(receiver.hits) == 1, what="the first try")
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 3
    r = await row(store, event)
    assert (r["status"], r["tries"], r["last_error"]) == (
        "pending", 1, "try interrupted by a shutdown")
    async with running(store, settings):
        await wait_until(status_is(store, event, "delivered"),
                         what="the interrupted event delivered")
    assert [h.try_number for h in receiver.hits] == [1, 2]


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_a_queued_event_wakes_an_idle_deliverer_at_once(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    account, _ = await store.create_account("a", webhook_url=receiver.url())
    # time_scale 1: the fallback poll is 1 s, so a fast delivery proves the NOTIFY path.
    async with running(store, make_settings(tmp_path, time_scale=1.0)):
        first = await queue(store, account.id, 1)
        await wait_until(status_is(store, first, "delivered"), what="the first event delivered")
        queued = time.monotonic()
        second = await queue(store, account.id, 2)
        await wait_until(lambda: len(receiver.hits) == 2, what="the second event's try")
        assert receiver.hits[1].event_id == second
        assert receiver.hits[1].at - queued < 0.5


async def test_a_refused_connection_is_a_failed_try(store: Store, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    account, _ = await store.create_account("a", webhook_url=f"http://127.0.0.1:{port}/")
    event = await queue(store, account.id, 1)
    metrics = Metrics()
    async with running(store, make_settings(tmp_path), metrics):

        async def refused() -> bool:
            # Counted when answered; ``tries`` already counts a try that is only claimed.
            return tries_sample(metrics, "connection_error") >= 2

        await wait_until(refused, what="two refused tries counted")
    r = await row(store, event)
    assert r["status"] == "pending" and r["last_status_code"] is None
    assert r["last_error"].startswith("cannot connect")
    assert tries_sample(metrics, "connection_error") >= 2


class FlakyQueue:
    """The store's webhook queue, except that the first claims find the database gone."""

    def __init__(self, queue: Any, failures: int) -> None:
        self._queue = queue
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    async def claim(self, *args: Any, **kwargs: Any) -> Any:
        if self.failures > 0:
            self.failures -= 1
            from engine.runtime.errors import DatabaseUnavailable

            raise DatabaseUnavailable("connection refused")
        return await self._queue.claim(*args, **kwargs)


class FlakyStore:
    """The store, with a :class:`FlakyQueue` as its webhook queue."""

    def __init__(self, store: Store, failures: int) -> None:
        self._store = store
        self.webhook_queue = FlakyQueue(store.webhook_queue, failures)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_database_outage_delays_delivery_but_does_not_stop_the_deliverer(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    account, _ = await store.create_account("a", webhook_url=receiver.url())
    event = await queue(store, account.id, 1)
    flaky = FlakyStore(store, failures=2)
    async with running(flaky, make_settings(tmp_path)):  # type: ignore[arg-type]
        await wait_until(status_is(store, event, "delivered"),
                         what="delivered through the flaky store")
    assert flaky.webhook_queue.failures == 0
    assert [h.try_number for h in receiver.hits] == [1]


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_many_hanging_tries_leave_slots_for_other_accounts(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    slow, _ = await store.create_account("slow", webhook_url=receiver.url("/slow"))
    fast, _ = await store.create_account("fast", webhook_url=receiver.url("/fast"))
    receiver.behaviour = lambda hit: "hang" if hit.path == "/slow" else "ok"
    for m in range(1, 21):
        await queue(store, slow.id, m)
    settings = make_settings(tmp_path, webhook_concurrency=8, webhook_timeout=3.0)
    async with running(store, settings):
        # The slow account gets at most 6 of the 8 slots.
        await wait_until(lambda: len(receiver.hits) >= 6, what="slow tries in flight")
        started = time.monotonic()
        others = [await queue(store, fast.id, 100 + i) for i in range(3)]
        for e in others:
            await wait_until(status_is(store, e, "delivered"), what="the other account")
        assert time.monotonic() - started < 2.0
        assert len([h for h in receiver.hits if h.path == "/slow"]) == 6
        receiver.release.set()


async def test_a_lone_account_uses_every_slot_and_frees_them_for_another_account(
    store: Store, receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tries are held open for as long as the test needs, not just under the quick-answer
    # window, so that the claim's share rule is what is tested (not a try's age).
    monkeypatch.setattr(deliverer_module, "QUICK_ANSWER", 60.0)
    lone, _ = await store.create_account("lone", webhook_url=receiver.url("/lone"))
    other, _ = await store.create_account("other", webhook_url=receiver.url("/other"))
    settings = make_settings(tmp_path, webhook_concurrency=8, webhook_timeout=60.0)
    async with running(store, settings):
        # One quick 200 first: the receiver answers, so it may have more than its share.
        first = await queue(store, lone.id, 1)
        await wait_until(status_is(store, first, "delivered"), what="the first event")
        receiver.behaviour = lambda hit: "hold"
        lone_events = [await queue(store, lone.id, m) for m in range(2, 22)]
        # Alone, it takes all 8 slots, not just its share of 6.
        await wait_until(lambda: len(receiver.holds) == 8, what="every slot in use")
        others = [await queue(store, other.id, 100 + i) for i in range(3)]
        await asyncio.sleep(0.2)
        assert len(receiver.holds) == 8  # no slot is free, so the other account waits

        def hits(path: str) -> int:
            return sum(h.path == path for h in receiver.hits)

        # As the lone account's tries end, their slots go to the other account (which has
        # due events) until the lone account is back at its share of 6.
        for n in (1, 2):
            receiver.holds[n - 1].set()
            await wait_until(lambda n=n: hits("/other") == n, what=f"other account try {n}")  # type: ignore[misc]
            await asyncio.sleep(0.1)
            assert hits("/lone") == 1 + 8 and hits("/other") == n
        receiver.behaviour = lambda hit: "ok"
        for gate in receiver.holds:
            gate.set()
        for e in [*lone_events, *others]:
            await wait_until(status_is(store, e, "delivered"), what=f"event {e}")


async def test_a_receiver_that_answers_slowly_keeps_to_its_share(
    store: Store, receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 200s that take longer than the quick-answer window earn no slots beyond the share.
    monkeypatch.setattr(deliverer_module, "QUICK_ANSWER", 0.1)
    slow, _ = await store.create_account("slow", webhook_url=receiver.url("/slow"))
    receiver.behaviour = lambda hit: "slow"
    settings = make_settings(tmp_path, webhook_concurrency=8, webhook_timeout=5.0)
    async with running(store, settings):
        first = await queue(store, slow.id, 1)
        await wait_until(status_is(store, first, "delivered"), what="the first event")
        events = [await queue(store, slow.id, m) for m in range(2, 32)]
        await wait_until(status_is(store, events[-1], "delivered"), timeout=20,
                         what="all delivered")
    assert receiver.most_inside == 6  # three quarters of 8, never all of them
