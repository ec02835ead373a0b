"""The notification channels API through the real app on a real socket: create, read,
change, delete; Apprise URL validation; secrets write-only; the private-address rule; the
test button; the delivery log; other accounts' channels look missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.runtime.settings import Settings
from engine.web.app import create_app
from tests.support.engine_support import add_monitor
from tests.support.notify_support import HttpReceiver, SmtpServer
from tests.support.web import serve

BASE = "/webapi/notification-channels"
ALL_EVENTS = [
    "downtime", "uptime_restored", "certificate_invalid", "certificate_recovered",
    "certificate_renewal_due", "domain_renewal_due", "domain_invalid", "domain_recovered",
]


async def call(client: aiohttp.ClientSession, method: str, path: str, body: Any = None
               ) -> tuple[int, Any]:
    async with client.request(method, path, json=body) as resp:
        if resp.status == 204:
            return 204, None
        assert resp.headers["Content-Type"].startswith("application/json")
        return resp.status, await resp.json()


async def test_a_channel_is_created_read_listed_changed_and_deleted(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str]
) -> None:
    acc, _ = account
    m1, _, _ = await add_monitor(store, acc.id, "http://127.0.0.1:9/a", notify=False)
    status, created = await call(client, "POST", BASE, {
        "name": "On call", "url": "json://127.0.0.1:8000/hook",
    })
    assert status == 201, created
    assert created == {
        "id": created["id"], "name": "On call", "url": "json://127.0.0.1:8000/hook",
        "events": ALL_EVENTS, "monitor_ids": None, "is_enabled": True,
    }
    cid = created["id"]
    assert await call(client, "GET", f"{BASE}/{cid}") == (200, created)
    assert await call(client, "GET", BASE) == (200, [created])
    # PUT changes the fields it carries and keeps the others.
    status, changed = await call(client, "PUT", f"{BASE}/{cid}", {
        "events": ["downtime", "uptime_restored"], "monitor_ids": [m1],
    })
    assert status == 200, changed
    assert changed == {**created, "events": ["downtime", "uptime_restored"],
                       "monitor_ids": [m1]}
    status, changed = await call(client, "PUT", f"{BASE}/{cid}", {"is_enabled": False})
    assert changed["is_enabled"] is False and changed["monitor_ids"] == [m1]
    status, changed = await call(client, "PUT", f"{BASE}/{cid}", {"monitor_ids": None})
    assert changed["monitor_ids"] is None
    assert await call(client, "DELETE", f"{BASE}/{cid}") == (204, None)
    assert (await call(client, "GET", f"{BASE}/{cid}"))[0] == 404
    assert await call(client, "GET", BASE) == (200, [])


@pytest.mark.parametrize(("url", "words"), [
    ("foo://bar", "foo:// is not a notification service"),
    ("no scheme at all", "must start with a scheme"),
    ("json://", "not a valid json:// URL"),
    ("mailto://", "not a valid mailto:// URL"),
    (42, "must be an Apprise URL"),
    ("json://127.0.0.1/\x00", "control characters"),
])
async def test_a_url_apprise_cannot_use_is_a_422_under_url_saying_why(
    client: aiohttp.ClientSession, url: Any, words: str
) -> None:
    status, body = await call(client, "POST", BASE, {"name": "x", "url": url})
    assert status == 422
    assert list(body["errors"]) == ["url"]
    assert words in body["errors"]["url"][0]


async def test_bad_fields_are_422s_naming_each_field(
    client: aiohttp.ClientSession, store: Store
) -> None:
    other, _ = await store.create_account("other")
    theirs, _, _ = await add_monitor(store, other.id, "http://127.0.0.1:9/", notify=False)
    status, body = await call(client, "POST", BASE, {
        "name": "", "url": "json://127.0.0.1/x", "events": ["downtime", "exploded"],
        "monitor_ids": [theirs], "is_enabled": "yes",
    })
    assert status == 422
    assert set(body["errors"]) == {"name", "events", "monitor_ids", "is_enabled"}
    assert "exploded" in body["errors"]["events"][0]
    assert str(theirs) in body["errors"]["monitor_ids"][0]
    status, body = await call(client, "POST", BASE, {"events": []})
    assert status == 422 and {"url", "name", "events"} <= set(body["errors"])
    assert (await call(client, "POST", BASE, [1]))[0] == 422


@pytest.mark.parametrize(("url", "secrets", "kept"), [
    ("mailto://alerts:hunter2pass@127.0.0.1:2525?from=u@example.com&to=o@example.com",
     ["hunter2pass"], ["mailto://", "127.0.0.1:2525", "o@example.com"]),
    ("ntfy://127.0.0.1:8000/alerts?token=tk_abcdef123456",
     ["tk_abcdef123456"], ["ntfy://", "127.0.0.1:8000", "alerts"]),
    ("json://127.0.0.1:8000/hook?+Authorization=Bearer%20sekrit-value&+X-Key=zz99yy88",
     ["sekrit-value", "zz99yy88"],
     ["json://127.0.0.1:8000/hook?+Authorization=****&+X-Key=****"]),
    ("pagerduty://routing-key-123@api-key-456/",
     ["routing-key-123", "api-key-456"], ["pagerduty://"]),
    ("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#ops",
     ["T1JJ3T3L2", "A1BRTD4JD", "TIiajkdnlazkcOXrIdevi7FQ"], ["slack://", "ops"]),
    ("ntfy://ops:pw-ntfy-99@127.0.0.1:8000/alerts",
     ["pw-ntfy-99"], ["ntfy://ops:", "127.0.0.1:8000"]),
])
async def test_secrets_are_write_only_and_the_url_shown_back_keeps_the_stored_one(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str], url: str,
    secrets: list[str], kept: list[str],
) -> None:
    acc, _ = account
    status, created = await call(client, "POST", BASE, {"name": "n", "url": url})
    assert status == 201, created
    for answer in (created, (await call(client, "GET", f"{BASE}/{created['id']}"))[1],
                   (await call(client, "GET", BASE))[1][0]):
        shown = answer["url"]
        assert "****" in shown
        for secret in secrets:
            assert secret not in shown
        for part in kept:
            assert part in shown
    # Sent back as shown (with another change): the stored URL stays.
    status, changed = await call(client, "PUT", f"{BASE}/{created['id']}",
                                 {"url": created["url"], "name": "renamed"})
    assert status == 200, changed
    [stored] = await store.list_channels(acc.id)
    assert stored.url == url and stored.name == "renamed"
    # At rest the URL is encrypted: the row holds no secret.
    async with store.pool.acquire() as conn:
        raw = await conn.fetchval("SELECT url FROM notification_channels")
    assert all(secret not in raw for secret in secrets) and "://" not in raw
    # A masked URL that is not the one shown cannot be stored.
    status, body = await call(client, "PUT", f"{BASE}/{created['id']}",
                              {"url": created["url"] + "x"})
    assert status == 422 and "****" in body["errors"]["url"][0]


async def test_another_accounts_channel_is_a_404_everywhere(
    client: aiohttp.ClientSession, store: Store
) -> None:
    other, _ = await store.create_account("other")
    theirs = await store.create_channel(
        other.id, name="theirs", url="json://127.0.0.1:8000/x", events=ALL_EVENTS,
        monitor_ids=None, is_enabled=True,
    )
    for method, suffix, body in (("GET", "", None), ("PUT", "", {"name": "mine"}),
                                 ("DELETE", "", None), ("POST", "/test", None),
                                 ("GET", "/deliveries", None)):
        status, _ = await call(client, method, f"{BASE}/{theirs.id}{suffix}", body)
        assert status == 404, (method, suffix)
    assert (await call(client, "GET", BASE)) == (200, [])
    assert (await store.get_channel(other.id, theirs.id)).name == "theirs"


async def test_a_private_channel_host_is_refused_unless_private_targets_are_allowed(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    _, token = account
    strict = Settings(data_dir=tmp_path / "d", base_url="http://127.0.0.1:8080",
                      rate_limit_per_second=0, allow_private_targets=False)
    async with serve(create_app(store, strict)) as url, aiohttp.ClientSession(
        base_url=url, headers={"Authorization": f"Bearer {token}"}
    ) as http:
        for target in ("json://127.0.0.1:8000/x", "ntfy://10.1.2.3/alerts",
                       "mailto://u:p@192.168.1.10:25?from=a@example.com&to=b@example.com"):
            status, body = await call(http, "POST", BASE, {"name": "n", "url": target})
            assert status == 422, target
            assert "non-public address" in body["errors"]["url"][0]
        # Fixed-endpoint services reach the vendor, not a host the URL chose.
        status, body = await call(http, "POST", BASE, {
            "name": "chat", "url": "discord://4174216298/JHMHI8qBe7bk2ZwO5U711o3dV_js"})
        assert status == 201, body


async def test_the_test_button_says_delivered_or_the_services_reason(
    client: aiohttp.ClientSession,
) -> None:
    with SmtpServer() as smtp:
        _, good = await call(client, "POST", BASE, {"name": "mail", "url": smtp.url()})
        _, bad = await call(client, "POST", BASE,
                            {"name": "mail", "url": smtp.url(password="wrong-password")})
        assert await call(client, "POST", f"{BASE}/{good['id']}/test") == (
            200, {"delivered": True})
        [mail] = smtp.mails
        assert mail.subject == "Upwatch test message"
        status, body = await call(client, "POST", f"{BASE}/{bad['id']}/test")
        assert status == 200 and body["delivered"] is False
        assert "535" in body["error"] and "Authentication credentials invalid" in body["error"]
        assert "wrong-password" not in body["error"]
    async with HttpReceiver() as receiver:
        port = receiver.port
        _, hook = await call(client, "POST", BASE,
                             {"name": "hook", "url": receiver.json_url()})
    # The receiver is gone now: a refused connection, in words.
    status, body = await call(client, "POST", f"{BASE}/{hook['id']}/test")
    assert body["delivered"] is False and "Connection refused" in body["error"], (port, body)


async def test_the_openapi_document_describes_channels_with_the_event_names_as_an_enum(
    client: aiohttp.ClientSession,
) -> None:
    _, doc = await call(client, "GET", "/webapi/openapi.json")
    paths = doc["paths"]
    assert {"get", "post"} <= set(paths[BASE])
    assert {"get", "put", "delete"} <= set(paths[BASE + "/{id}"])
    assert "post" in paths[BASE + "/{id}/test"] and "get" in paths[BASE + "/{id}/deliveries"]
    schema = paths[BASE]["post"]["responses"]["201"]["content"]["application/json"]["schema"]
    assert schema["properties"]["events"]["items"]["enum"] == ALL_EVENTS
