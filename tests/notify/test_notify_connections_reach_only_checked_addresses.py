"""The private-address rule holds where Apprise's providers connect, not only where the
channel was checked: a name that answers a public address to the check and a private one to
the provider (DNS rebinding), or a redirect to a private host, reaches nothing. Real sends
through Apprise to a real local receiver and SMTP server; nothing mocked."""

from __future__ import annotations

import socket

from engine.delivery.notify import connectguard
from engine.delivery.notify.sender import NotifyPool
from tests.support.notify_support import HttpReceiver, SmtpServer


async def test_a_send_that_must_stay_public_never_reaches_a_loopback_receiver() -> None:
    pool = NotifyPool(2)
    try:
        async with HttpReceiver() as receiver:
            by_name = receiver.json_url().replace("127.0.0.1", "localhost")
            for url in (receiver.json_url(), by_name):
                # The check before the send is what a rebinding name passes; this is the
                # send itself, where the provider looks the name up again.
                result = await pool.send(url, "t", "b", timeout=5, allow_private=False)
                assert not result.delivered
                words = "non-public address 127.0.0.1; private targets are not allowed"
                assert result.error is not None and words in result.error, result.error
            assert receiver.hits == []
            # The same sends where private targets are allowed arrive: the refusal above is
            # the rule, not a broken receiver.
            result = await pool.send(by_name, "t", "b", timeout=5, allow_private=True)
            assert result.delivered, result.error
            assert len(receiver.delivered()) == 1
    finally:
        pool.close()


async def test_mail_to_a_private_smtp_server_is_refused_at_connect() -> None:
    pool = NotifyPool(1)
    try:
        with SmtpServer() as smtp:
            result = await pool.send(smtp.url(), "t", "b", timeout=5, allow_private=False)
            assert not result.delivered
            assert smtp.mails == []
            result = await pool.send(smtp.url(), "t", "b", timeout=5, allow_private=True)
            assert result.delivered, result.error
            assert len(smtp.mails) == 1
    finally:
        pool.close()


def test_lookups_outside_a_guarded_send_are_untouched() -> None:
    connectguard.install()
    assert socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)
    with connectguard.public_only():
        try:
            socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            assert "non-public address" in str(exc)
        else:
            raise AssertionError("a guarded lookup of localhost answered")
        with connectguard.public_only(False):
            assert socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)
    assert socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)
