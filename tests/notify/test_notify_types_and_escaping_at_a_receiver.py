"""What a chat service and a mail reader get, seen at real local receivers (json:// on an
HTTP receiver, mail on an SMTP server) through the real notification runner: Apprise's
message type per event (the colour Slack, Discord and Teams show), the worst type for a
digest, and an alias or a quoted response that cannot turn into a live link or image."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.db.notifications import queue_notifications
from engine.db.store import Store
from engine.domain import payloads
from tests.support.engine_support import add_monitor, fast_settings
from tests.support.notify_support import HttpReceiver, SmtpServer, running_notifier
from tests.support.wait import wait_until

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
ALL = list(payloads.EVENTS)
EVIL = "http://evil.example"


def bodies(alias: str, error: str) -> dict[str, bytes]:
    m = payloads.MonitorRef(1, "https://shop.example.com/", alias)
    cert = {"issuer": "Test CA", "signature_algorithm": "sha256WithRSAEncryption",
            "valid_from": NOW - timedelta(days=60), "valid_to": NOW + timedelta(days=30)}
    return {
        "downtime": payloads.downtime(m, last_check_at=NOW, error=error, http_status_code=503,
                                      detected_by="eu", verified_via="us"),
        "uptime_restored": payloads.uptime_restored(m, last_check_at=NOW, http_status_code=200,
                                                    downtime_seconds=125),
        "certificate_invalid": payloads.certificate_invalid(m, last_check_at=NOW, error=error),
        "certificate_recovered": payloads.certificate_recovered(m, last_check_at=NOW, **cert),
        "certificate_renewal_due": payloads.certificate_renewal_due(
            m, last_check_at=NOW, expires_in_days=30, **cert),
    }


async def queue(store: Store, account_id: int, monitor_id: int, event: str,
                body: bytes) -> None:
    async with store.pool.acquire() as conn, conn.transaction():
        await queue_notifications(conn, account_id=account_id, monitor_id=monitor_id,
                                  check_id=None, event=event, body=body, since=NOW)


async def monitor(store: Store, account_id: int) -> int:
    monitor_id, _, _ = await add_monitor(store, account_id, "http://127.0.0.1:9/", notify=False)
    return monitor_id


async def test_each_event_goes_out_with_the_type_chat_services_colour_it_by(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, notify_timeout=5.0, notify_group_max=10)
    async with HttpReceiver() as receiver:
        await store.create_channel(acc.id, name="chat", url=receiver.json_url("/chat"),
                                   events=ALL, monitor_ids=None, is_enabled=True)
        mid = await monitor(store, acc.id)
        for event, body in bodies("Shop", "HTTP 503").items():
            await queue(store, acc.id, mid, event, body)
        async with running_notifier(store, settings):
            async def five() -> bool:
                return len(receiver.delivered("/chat")) >= 5
            await wait_until(five, timeout=20, what="the five messages")
    seen = {h.json()["title"].split(":")[0]: h.json()["type"]
            for h in receiver.delivered("/chat")}
    assert seen == {
        "DOWN": "failure",
        "UP again": "success",
        "Certificate invalid": "failure",
        "Certificate valid again": "success",
        "Certificate expires in 30 days": "warning",
    }


async def test_a_digest_has_the_worst_type_of_its_events(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    # One message at once, the rest as a digest at the window's end.
    settings = fast_settings(tmp_path, notify_timeout=5.0, notify_group_max=1)
    every = bodies("Shop", "HTTP 503")
    async with HttpReceiver() as receiver:
        await store.create_channel(acc.id, name="chat", url=receiver.json_url("/chat"),
                                   events=ALL, monitor_ids=None, is_enabled=True)
        mid = await monitor(store, acc.id)
        async with running_notifier(store, settings):
            for event in ("uptime_restored", "certificate_renewal_due", "uptime_restored"):
                await queue(store, acc.id, mid, event, every[event])

            async def two() -> bool:
                return len(receiver.delivered("/chat")) >= 2
            await wait_until(two, timeout=20, what="the single message and the digest")
    first, digest = (h.json() for h in receiver.delivered("/chat"))
    assert first["type"] == "success"
    assert "events came together" in digest["message"]
    assert digest["type"] == "warning"


async def test_what_users_and_targets_wrote_never_becomes_a_link_or_an_image_in_mail(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, notify_timeout=5.0, notify_group_max=10)
    alias = (f"Shop [click]({EVIL}/a) ![pic]({EVIL}/p.png) <img src={EVIL}/q.png> "
             f"**loud** @everyone")
    error = f'HTTP 503: <a href="{EVIL}/r">login</a> <{EVIL}/s> `code`'
    with SmtpServer() as smtp:
        async with HttpReceiver() as receiver:
            await store.create_channel(acc.id, name="mail", url=smtp.url(), events=ALL,
                                       monitor_ids=None, is_enabled=True)
            await store.create_channel(acc.id, name="chat", url=receiver.json_url("/chat"),
                                       events=ALL, monitor_ids=None, is_enabled=True)
            mid = await monitor(store, acc.id)
            await queue(store, acc.id, mid, "downtime", bodies(alias, error)["downtime"])
            async with running_notifier(store, settings):
                async def arrived() -> bool:
                    return bool(smtp.mails) and bool(receiver.delivered("/chat"))
                await wait_until(arrived, timeout=20, what="the mail and the chat message")
    [mail] = smtp.mails
    html = mail.html
    assert "<p>" in html
    # No live link, image or markup from the alias or the response...
    assert "<a " not in html and "<img" not in html and "<strong>loud" not in html
    assert "<code>" not in html
    # ...and both read as written.
    assert f"[click]({EVIL}/a)" in html and f"![pic]({EVIL}/p.png)" in html
    assert f"&lt;img src={EVIL}/q.png&gt;" in html and "**loud** @everyone" in html
    assert f'&lt;a href="{EVIL}/r"&gt;login&lt;/a&gt;' in html.replace("&quot;", '"')
    # Chat services that take Markdown as is get it escaped.
    chat = receiver.delivered("/chat")[0].json()
    assert f"\\[click\\]\\({EVIL}/a\\)" in chat["message"]
    assert "\\@everyone" in chat["message"]
    assert "\\<img" in chat["message"]
