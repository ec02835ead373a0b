"""Retention and partition upkeep: a small component that runs at start and then hourly.

- Creates the daily ``probe_results_YYYYMMDD`` partitions for today and the next days ahead,
  so results never pile up in the default partition.
- Drops whole daily partitions older than ``results_retention_days`` (cheap: no row-by-row
  delete) and deletes hourly rollups older than ``rollup_retention_days``.

Safe to run on several nodes at once: every step tolerates another node having done it.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from engine.db.store import Store
from engine.runtime.errors import DatabaseUnavailable
from engine.runtime.settings import Settings

log = logging.getLogger(__name__)

DAYS_AHEAD = 3  # partitions for today and this many days after it
RETRY_SECONDS = 60.0


class PartitionUpkeep:
    """Partition creation and retention (this module was engine/maintenance.py; the name now
    belongs to maintenance windows, engine/domain/maintenance.py)."""

    def __init__(self, store: Store, settings: Settings, *, interval: float = 3600.0) -> None:
        self.store = store
        self.settings = settings
        self.interval = interval

    async def run(self, stop: asyncio.Event) -> None:
        """Run once now, then every ``interval`` (sooner after a failure) until ``stop``."""
        while not stop.is_set():
            try:
                await self.run_once()
                wait = self.interval
            except DatabaseUnavailable as exc:
                log.warning("partition upkeep postponed, database unavailable: %s", exc)
                wait = min(self.interval, RETRY_SECONDS)
            except Exception:
                log.exception("partition upkeep failed; will retry")
                wait = min(self.interval, RETRY_SECONDS)
            try:
                await asyncio.wait_for(stop.wait(), wait)
            except TimeoutError:
                pass

    async def run_once(self, now: datetime | None = None) -> dict[str, int]:
        """One pass; returns what it did (partitions created/dropped, rollups deleted)."""
        now = now or datetime.now(UTC)
        today = now.astimezone(UTC).date()
        created = await self.store.ensure_result_partitions(today, DAYS_AHEAD + 1)
        keep_from = today - timedelta(days=self.settings.results_retention_days)
        dropped = await self.store.drop_result_partitions(keep_from)
        rollups = await self.store.delete_rollups_before(
            now - timedelta(days=self.settings.rollup_retention_days)
        )
        if created or dropped or rollups:
            log.info(
                "partition upkeep: %d partitions created, %d dropped, %d rollups deleted",
                len(created), len(dropped), rollups,
            )
        return {"created": len(created), "dropped": len(dropped), "rollups_deleted": rollups}
