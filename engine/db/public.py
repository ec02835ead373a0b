"""What the public status page reads: a monitor by identifier, daily uptime bars, the last
24 hours of response times, recent outages. Read-only."""

from __future__ import annotations

from engine.db.base import StoreBase


class PublicMixin(StoreBase):
    pass
