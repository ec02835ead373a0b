"""What the engine reads and writes: checks to schedule, result batches (COPY + rollups), state transitions with their outages and webhook events in one transaction, retention."""

from __future__ import annotations

from engine.db.base import StoreBase


class ProbingMixin(StoreBase):
    pass
