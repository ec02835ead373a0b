"""The store: the one object through which Upwatch reads and writes PostgreSQL."""

from __future__ import annotations

import asyncpg

from engine.db.accounts import AccountsMixin
from engine.db.cluster import ClusterMixin
from engine.db.monitor_batches import MonitorBatchesMixin
from engine.db.monitors import MonitorsMixin
from engine.db.pool import create_pool
from engine.db.probing import ProbingMixin
from engine.db.public import PublicMixin
from engine.db.webhook_queue import WebhookQueueMixin


class Store(
    AccountsMixin, MonitorsMixin, ProbingMixin, WebhookQueueMixin, ClusterMixin, PublicMixin,
    MonitorBatchesMixin,
):
    """All store areas over one pool. Create with :meth:`connect`, end with :meth:`close`."""

    @classmethod
    async def connect(cls, dsn: str, *, min_size: int = 2, max_size: int = 20) -> Store:
        return cls(await create_pool(dsn, min_size=min_size, max_size=max_size))

    async def close(self) -> None:
        await self._pool.close()


__all__ = ["Store", "asyncpg"]
