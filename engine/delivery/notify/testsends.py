"""Test messages of the API's test button, in a component of their own: a thread pool that
is not the outbox's (a test never delays a notification, nor a notification a test) and
the limits of :mod:`engine.delivery.notify.testgate`.

:meth:`ChannelTests.send` either refuses at once (:class:`~engine.delivery.notify.testgate.
Refused`) or sends within the send deadline and answers the service's verdict. A test holds
its places until its thread has ended, so the threads in use never exceed the pool's.
"""

from __future__ import annotations

import dataclasses
import time

from engine.delivery.notify.sender import (
    TEST_BODY,
    TEST_TITLE,
    NotifyPool,
    SendResult,
    check_policy,
)
from engine.delivery.notify.testgate import Gate, Limits, Refused


class ChannelTests:
    """Tests from every account of this process; ``close`` when the process stops."""

    def __init__(self, *, timeout: float, allow_private: bool,
                 limits: Limits | None = None) -> None:
        self.limits = dataclasses.replace(limits or Limits(), deadline=timeout)
        self._gate = Gate(self.limits)
        self._pool = NotifyPool(self.limits.server_at_once)
        self._timeout = timeout
        self._allow_private = allow_private

    async def send(self, account_id: int, channel_id: int, url: str) -> SendResult | Refused:
        """Send the test message to channel ``channel_id`` (whose URL is ``url``) of
        ``account_id``, or refuse it by the limits."""
        ticket = self._gate.start(account_id, channel_id, time.monotonic())
        if isinstance(ticket, Refused):
            return ticket
        submitted = False
        try:
            refused = await check_policy(url, allow_private=self._allow_private)
            if refused is not None:
                return SendResult(False, refused)
            submitted = True
            return await self._pool.send(
                url, TEST_TITLE, TEST_BODY, timeout=self._timeout,
                allow_private=self._allow_private, done=lambda: self._gate.finish(ticket),
            )
        finally:
            if not submitted:
                self._gate.finish(ticket)

    def close(self) -> None:
        self._pool.close()
