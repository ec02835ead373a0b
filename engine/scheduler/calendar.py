"""The engine's copy of the maintenance windows, by monitor and by account, reloaded every
second.

The engine asks it only off the steady path (a probe that changes state, or the scheduling
of a check whose alert or restore waits): :meth:`MaintenanceCalendar.quiet` is two dict
lookups for a monitor without windows. A window the API creates or deletes takes effect
within ``REFRESH`` seconds (one small query a second per engine: windows only, however many
checks and monitors there are); while the database is away the last copy stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from engine.errors import DatabaseUnavailable
from engine.maintenance_windows import Window, quiet

log = logging.getLogger(__name__)

REFRESH = 1.0  # seconds between reloads


class MaintenanceCalendar:
    """``store`` needs ``windows_for_engine(now)``; a store without it (a test's or the
    bench's stand-in) gives a calendar that is always empty."""

    def __init__(self, store: Any, *, refresh: float = REFRESH) -> None:
        self._load = getattr(store, "windows_for_engine", None)
        self._refresh = refresh
        self._by_monitor: dict[int, list[Window]] = {}
        self._by_account: dict[int, list[Window]] = {}

    def windows(self, monitor_id: int, account_id: int) -> list[Window]:
        """The windows of the monitor: its own and its account's."""
        own = self._by_monitor.get(monitor_id)
        shared = self._by_account.get(account_id)
        if own is None:
            return shared or []
        return own + shared if shared else own

    def quiet(
        self, monitor_id: int, account_id: int, now: datetime
    ) -> tuple[datetime | None, datetime | None]:
        """(muted_until, resumed_at) of the monitor at ``now`` (maintenance_windows.quiet)."""
        windows = self.windows(monitor_id, account_id)
        if not windows:
            return None, None
        return quiet(windows, now)

    async def reload(self) -> None:
        if self._load is not None:
            self._by_monitor, self._by_account = await self._load(datetime.now(UTC))

    async def run(self, stop: asyncio.Event) -> None:
        if self._load is None:
            return
        while not stop.is_set():
            try:
                await self.reload()
            except DatabaseUnavailable as exc:
                log.debug("maintenance windows not reloaded: %s", exc)
            except Exception:  # this loop must outlive any one failure
                log.exception("reloading maintenance windows failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._refresh)
