"""Fixtures of the webhook tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.webhook_support import Receiver, serving_receiver


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A webhook receiver on a free loopback port (see :class:`Receiver`)."""
    async with serving_receiver() as rec:
        yield rec
