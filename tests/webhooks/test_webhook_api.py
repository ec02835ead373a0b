"""The delivery log endpoints: GET /webapi/webhooks and POST /webapi/webhooks/{id}/retry,
through the real app on a real socket."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import aiohttp

from engine.db.store import Store
from engine.db.webhook_queue import insert_event
from engine.domain import payloads

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")


async def queue(store: Store, account_id: int, monitor_id: int, **kw: Any) -> int:
    body = payloads.certificate_invalid(
        payloads.MonitorRef(monitor_id, "https://example.com/", "example"),
        last_check_at=NOW, error="certificate expired",
    )
    async with store.pool.acquire() as conn, conn.transaction():
        return await insert_event(
            conn, account_id=account_id, monitor_id=monitor_id, check_id=kw.get("check_id"),
            event=payloads.CERTIFICATE_INVALID, body=body, parent_id=kw.get("parent_id"),
        )


async def get(client: aiohttp.ClientSession, path: str) -> tuple[int, Any]:
    async with client.get(path) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        return resp.status, await resp.json()


async def post(client: aiohttp.ClientSession, path: str) -> tuple[int, Any]:
    async with client.post(path) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        return resp.status, await resp.json()


async def test_the_log_lists_events_newest_first_with_their_delivery_state(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    assert await get(client, "/webapi/webhooks") == (200, [])
    first = await queue(store, acc.id, 5, check_id=None)
    second = await queue(store, acc.id, 6)
    await store.webhook_queue.record_delivered(second, 200)
    status, body = await get(client, "/webapi/webhooks")
    assert status == 200
    assert [e["id"] for e in body] == [second, first]
    delivered, pending = body
    assert set(pending) == {
        "id", "event", "monitor_id", "check_id", "parent_id", "status", "tries",
        "last_status_code", "last_error", "next_try_at", "created_at", "delivered_at",
    }
    assert pending["event"] == "certificate_invalid"
    assert (pending["monitor_id"], pending["status"], pending["tries"]) == (5, "pending", 0)
    assert TIMESTAMP.match(pending["next_try_at"]) and TIMESTAMP.match(pending["created_at"])
    assert pending["delivered_at"] is None
    assert delivered["status"] == "delivered" and delivered["last_status_code"] == 200
    assert delivered["next_try_at"] is None and TIMESTAMP.match(delivered["delivered_at"])


async def test_the_log_filters_by_status_and_pages(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    ids = [await queue(store, acc.id, m) for m in range(1, 6)]
    await store.webhook_queue.mark_failed(ids[0], 500, "HTTP 500")
    await store.webhook_queue.record_delivered(ids[1])
    for status, expected in (
        ("failed", [ids[0]]), ("delivered", [ids[1]]), ("pending", ids[:1:-1]),
    ):
        code, body = await get(client, f"/webapi/webhooks?status={status}")
        assert code == 200 and [e["id"] for e in body] == expected, status
    code, page1 = await get(client, "/webapi/webhooks?limit=2")
    code2, page2 = await get(client, f"/webapi/webhooks?limit=2&before={page1[-1]['id']}")
    code3, page3 = await get(client, f"/webapi/webhooks?limit=2&before={page2[-1]['id']}")
    assert (code, code2, code3) == (200, 200, 200)
    assert [e["id"] for e in page1 + page2 + page3] == ids[::-1]


async def test_invalid_query_parameters_are_422_under_their_names(
    client: aiohttp.ClientSession,
) -> None:
    for query, field in (
        ("status=lost", "status"), ("status=", "status"), ("limit=0", "limit"),
        ("limit=501", "limit"), ("limit=ten", "limit"), ("limit=-1", "limit"),
        ("before=0", "before"), ("before=x", "before"), ("before=99999999999999999999", "before"),
    ):
        status, body = await get(client, f"/webapi/webhooks?{query}")
        assert status == 422, query
        assert isinstance(body["message"], str) and list(body["errors"]) == [field], query


async def test_another_accounts_events_are_invisible(
    client: aiohttp.ClientSession, store: Store
) -> None:
    other, _ = await store.create_account("other", webhook_url="http://127.0.0.1:9/")
    theirs = await queue(store, other.id, 1)
    await store.webhook_queue.mark_failed(theirs, 500, "HTTP 500")
    assert await get(client, "/webapi/webhooks") == (200, [])
    status, body = await post(client, f"/webapi/webhooks/{theirs}/retry")
    assert status == 404 and body == {"message": "Webhook not found."}


async def test_retry_requeues_a_failed_event_and_refuses_others(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    await store.set_webhook_url(acc.id, "http://127.0.0.1:9/hook")
    event = await queue(store, acc.id, 1)
    status, body = await post(client, f"/webapi/webhooks/{event}/retry")
    assert status == 409 and "pending" in body["message"]
    (_claimed,) = await store.webhook_queue.claim(1, 60)
    await store.webhook_queue.mark_failed(
        event, 503, "gave up after 24 h; last try: HTTP 503", tries=1)
    status, body = await post(client, f"/webapi/webhooks/{event}/retry")
    assert status == 200
    assert (body["id"], body["status"], body["tries"]) == (event, "pending", 1)
    assert TIMESTAMP.match(body["next_try_at"])
    # The next try carries the next number under the same id.
    (again,) = await store.webhook_queue.claim(1, 60)
    assert (again.id, again.tries) == (event, 2)
    await store.webhook_queue.record_delivered(event)
    status, body = await post(client, f"/webapi/webhooks/{event}/retry")
    assert status == 409 and "delivered" in body["message"]
    for bad in ("999999", "abc", "0"):
        status, body = await post(client, f"/webapi/webhooks/{bad}/retry")
        assert status == 404 and "message" in body


async def test_retry_without_a_webhook_url_is_a_conflict(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    event = await queue(store, acc.id, 1)
    await store.webhook_queue.mark_failed(
        event, None, "expired: no webhook URL was set within 24 h")
    status, body = await post(client, f"/webapi/webhooks/{event}/retry")
    assert status == 409 and "webhook URL" in body["message"]


async def test_the_log_needs_authentication_and_is_in_the_openapi_document(api: str) -> None:
    async with aiohttp.ClientSession(base_url=api) as anonymous:
        async with anonymous.get("/webapi/webhooks") as resp:
            assert resp.status == 401
        async with anonymous.post("/webapi/webhooks/1/retry") as resp:
            assert resp.status == 401
        async with anonymous.get("/webapi/openapi.json") as resp:
            doc = await resp.json()
    listing = doc["paths"]["/webapi/webhooks"]["get"]
    assert {p["name"] for p in listing["parameters"]} == {"status", "limit", "before"}
    item = listing["responses"]["200"]["content"]["application/json"]["schema"]["items"]
    assert set(item["required"]) == set(item["properties"])
    retry = doc["paths"]["/webapi/webhooks/{id}/retry"]["post"]
    assert {"200", "404", "409", "401"} <= set(retry["responses"])
