"""The three domain events as notification messages: titles, the domain, its expiry date
and registrar in the body, the colour of each, and a digest that counts them by kind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.db.notifications import QueuedNotification
from engine.delivery.notify import messages
from engine.domain import payloads

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
SHOP = payloads.MonitorRef(7, "https://shop.example.com/", "Shop")


def queued(n: int, event: str, body: bytes) -> QueuedNotification:
    return QueuedNotification(n, 1, 7, event, body, "ident7", None)


def test_domain_events_read_in_words() -> None:
    due = payloads.domain_renewal_due(
        SHOP, last_check_at=NOW, domain="example.com", expires_at=NOW + timedelta(days=13),
        expires_in_days=13, threshold_days=14, registrar="Registrar *Inc*")
    msg = messages.render(queued(1, "domain_renewal_due", due), "https://status.test/")
    assert msg.title == "Domain expires in 13 days: Shop"
    assert "The domain example.com of **Shop (https://shop.example.com/)** expires on " \
           "2026-05-14 12:00:00 UTC, in 13 days." in msg.body
    assert r"Registrar: Registrar \*Inc\*" in msg.body
    assert "Status page: https://status.test/ident7" in msg.body
    assert msg.notify_type == messages.WARNING

    bad = payloads.domain_invalid(
        SHOP, last_check_at=NOW, error="the registry lists the domain as clientHold",
        domain="example.com", expires_at=NOW + timedelta(days=100), statuses=["clientHold"])
    msg = messages.render(queued(2, "domain_invalid", bad), "https://status.test/")
    assert msg.title == "Domain invalid: Shop"
    assert "is not usable: the registry lists the domain as clientHold." in msg.body
    assert msg.notify_type == messages.FAILURE

    back = payloads.domain_recovered(
        SHOP, last_check_at=NOW, domain="example.com", expires_at=NOW + timedelta(days=365),
        registrar=None)
    msg = messages.render(queued(3, "domain_recovered", back), "https://status.test/")
    assert msg.title == "Domain valid again: Shop"
    assert "It expires on 2027-05-01 12:00:00 UTC." in msg.body
    assert msg.notify_type == messages.SUCCESS

    digest = messages.render_digest(
        [queued(1, "domain_renewal_due", due), queued(2, "domain_invalid", bad),
         queued(4, "domain_invalid", bad)], "https://status.test/")
    assert digest.title == "1 domain due for renewal, 2 domains expired or on hold"
    assert digest.notify_type == messages.FAILURE
