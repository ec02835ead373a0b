"""The engine's copy of the maintenance windows, by monitor and by account.

Reloaded when the API creates or deletes a window (NOTIFY ``upwatch_maintenance``, within
milliseconds), after every (re)connection of that LISTEN, and every ``REFRESH`` seconds as
the safety net (one small query: windows only, however many checks and monitors there are).
While the database is away the last copy stands.

The engine asks it only off the steady path (a probe that changes state, or the scheduling
of a check whose alert or restore waits): :meth:`MaintenanceCalendar.quiet` is two dict
lookups for a monitor without windows.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from engine.domain.maintenance import Window, quiet
from engine.runtime.errors import DatabaseUnavailable
from engine.scheduler.waiting import wait_any

log = logging.getLogger(__name__)

REFRESH = 5.0  # seconds between reloads without a notification
RETRY_MAX = 10.0  # seconds between LISTEN reconnections, at most


class MaintenanceCalendar:
    """``store`` needs ``windows_for_engine(now)`` (and ``listen_maintenance`` to reload on
    notifications); a store without them (a test's or the bench's stand-in) gives a
    calendar that is always empty."""

    def __init__(self, store: Any, *, refresh: float = REFRESH) -> None:
        self._load = getattr(store, "windows_for_engine", None)
        self._listen = getattr(store, "listen_maintenance", None)
        self._refresh = refresh
        self._by_monitor: dict[int, list[Window]] = {}
        self._by_account: dict[int, list[Window]] = {}
        self._wake = asyncio.Event()

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
        """Reload on notifications and every ``refresh`` seconds until ``stop``."""
        if self._load is None:
            return
        backoff = 0.5
        while not stop.is_set():
            try:
                if self._listen is None:
                    await self._poll(stop, None)
                else:
                    async with self._listen(self._wake.set) as listener:
                        backoff = 0.5
                        await self._poll(stop, listener)
            except DatabaseUnavailable as exc:
                log.debug("maintenance windows not reloaded: %s", exc)
            except Exception:  # this loop must outlive any one failure
                log.exception("reloading maintenance windows failed; retrying")
            await wait_any(stop, timeout=backoff)
            backoff = min(backoff * 2, RETRY_MAX)

    async def _poll(self, stop: asyncio.Event, listener: Any) -> None:
        """Reload now (notifications may have been missed), then on every notification or
        ``refresh``, until ``stop`` or the listener's connection is lost."""
        lost = listener.lost if listener is not None else asyncio.Event()
        while not stop.is_set() and not lost.is_set():
            self._wake.clear()
            try:
                await self.reload()
            except DatabaseUnavailable as exc:
                log.debug("maintenance windows not reloaded: %s", exc)
            await wait_any(stop, self._wake, lost, timeout=self._refresh)
