"""The store: the one object through which Upwatch reads and writes PostgreSQL."""

from __future__ import annotations

import asyncpg

from engine.db.accounts import AccountsMixin
from engine.db.badges import BadgesMixin
from engine.db.certificates import CertificatesMixin
from engine.db.cluster import ClusterMixin
from engine.db.maintenance import MaintenanceMixin
from engine.db.monitor_batches import MonitorBatchesMixin
from engine.db.monitors import MonitorsMixin
from engine.db.notifications import NotificationsMixin
from engine.db.outage_history import OutageHistoryMixin
from engine.db.pool import create_pool
from engine.db.probing import ProbingMixin
from engine.db.public import PublicMixin
from engine.db.timings import TimingsMixin
from engine.db.webhook_queue import WebhookQueueMixin
from engine.runtime.secretbox import SecretBox


class Store(
    AccountsMixin, MonitorsMixin, ProbingMixin, WebhookQueueMixin, ClusterMixin, PublicMixin,
    MaintenanceMixin, CertificatesMixin,
    TimingsMixin, BadgesMixin, OutageHistoryMixin,
    NotificationsMixin, MonitorBatchesMixin,
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

    async def close(self) -> None:
        await self._pool.close()

__all__ = ["Store", "asyncpg"]
