"""The store: the one object through which Upwatch reads and writes PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
from typing import Final

import asyncpg

from engine.db.accounts import AccountsMixin
from engine.db.badges import BadgesMixin
from engine.db.certificates import CertificatesMixin
from engine.db.cluster import ClusterMixin
from engine.db.heartbeats import HeartbeatsMixin
from engine.db.maintenance import MaintenanceMixin
from engine.db.monitor_batches import MonitorBatchesMixin
from engine.db.monitors import MonitorsMixin
from engine.db.notifications import NotificationsMixin
from engine.db.outage_history import OutageHistoryMixin
from engine.db.pool import create_pool
from engine.db.probing import ProbingMixin
from engine.db.public import PublicMixin
from engine.db.registrations import RegistrationsMixin
from engine.db.timings import TimingsMixin
from engine.db.webhook_queue import WebhookQueueMixin
from engine.runtime.secretbox import SecretBox

log = logging.getLogger(__name__)

# How long connections still in use may take to be given back when the store closes.
CLOSE_SECONDS: Final = 5.0


class Store(
    AccountsMixin, MonitorsMixin, ProbingMixin, WebhookQueueMixin, ClusterMixin, PublicMixin,
    MaintenanceMixin, CertificatesMixin,
    TimingsMixin, BadgesMixin, OutageHistoryMixin,
    NotificationsMixin, MonitorBatchesMixin, HeartbeatsMixin, RegistrationsMixin,
):
    """All store areas over one pool. Create with :meth:`connect`, end with :meth:`close`."""

    @classmethod
    async def connect(
        cls, dsn: str, *, min_size: int = 2, max_size: int = 20,
        secrets: SecretBox | None = None,
    ) -> Store:
        """``secrets``: the key for secrets at rest (``SecretBox.from_settings``); None: the
        environment's (``engine.runtime.secretbox.default_box``)."""
        store = cls(await create_pool(dsn, min_size=min_size, max_size=max_size))
        store._secrets = secrets
        return store

    async def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Close the pool: connections still in use get ``timeout`` seconds to be given back,
        then every connection is closed at once, so that a stop never waits on a query
        stuck behind a lock."""
        try:
            await asyncio.wait_for(self._pool.close(), timeout)
        except TimeoutError:
            log.warning("database connections still in use %.0f s after the stop; closing them",
                        timeout)
            self._pool.terminate()

__all__ = ["Store", "asyncpg"]
