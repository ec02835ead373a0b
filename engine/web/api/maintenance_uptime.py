"""Maintenance left out of the 30-day uptime the monitor list and get show
(``meta.average_uptime_percentage``), as the statistics endpoint does.

An account's windows are read once a second at most per API process (:class:`WindowsCache`;
a create or delete through this process is seen at once, one through another within a
second), so a list or get of an account without windows costs no query; an account with
windows that cover some of the 30 days costs one more, for those monitors' outages.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime

from aiohttp import web

from engine.db.monitor_reads import STATS_WINDOW
from engine.db.monitor_records import MonitorRecord
from engine.db.store import Store
from engine.domain.maintenance import Window, net_of_maintenance, spans_of
from engine.domain.timefmt import utcnow
from engine.web.keys import STORE

TTL = 1.0  # seconds an account's windows are kept
LIMIT = 10_000  # accounts kept at most (all forgotten past it)


class WindowsCache:
    def __init__(self, ttl: float = TTL) -> None:
        self._ttl = ttl
        self._entries: dict[int, tuple[float, list[Window]]] = {}

    async def of_account(self, store: Store, account_id: int) -> list[Window]:
        now = time.monotonic()
        entry = self._entries.get(account_id)
        if entry is not None and now - entry[0] < self._ttl:
            return entry[1]
        windows = await store.list_windows(account_id)
        if len(self._entries) >= LIMIT:
            self._entries.clear()
        self._entries[account_id] = (now, windows)
        return windows

    def forget(self, account_id: int) -> None:
        self._entries.pop(account_id, None)


WINDOWS_CACHE = web.AppKey("maintenance_windows_cache", WindowsCache)


async def windows_of_monitor(
    request: web.Request, account_id: int, monitor_id: int
) -> list[Window]:
    """The windows of the account that cover the monitor (through the cache)."""
    windows = await request.app[WINDOWS_CACHE].of_account(request.app[STORE], account_id)
    return [w for w in windows if w.monitor_ids is None or monitor_id in w.monitor_ids]


async def with_maintenance(
    request: web.Request, account_id: int, monitors: list[MonitorRecord],
    now: datetime | None = None,
) -> list[MonitorRecord]:
    """``monitors`` with their uptime figures net of maintenance windows (the statistics
    endpoint's formula, docs/alerts.md); those without windows in the 30 days unchanged."""
    store = request.app[STORE]
    windows = await request.app[WINDOWS_CACHE].of_account(store, account_id)
    if not windows or not monitors:
        return monitors
    now = now or utcnow()
    since = now - STATS_WINDOW
    spans_by_check: dict[int, list[tuple[datetime, datetime]]] = {}
    for m in monitors:
        check = m.checks.get("uptime")
        if check is None or m.uptime is None:
            continue
        mine = [w for w in windows if w.monitor_ids is None or m.id in w.monitor_ids]
        spans = spans_of(mine, since, now) if mine else []
        if spans:
            spans_by_check[check.id] = spans
    if not spans_by_check:
        return monitors
    outages = await store.outage_spans(list(spans_by_check), since, now)
    out = []
    for m in monitors:
        check = m.checks.get("uptime")
        figures = m.uptime
        window_spans = spans_by_check.get(check.id) if check is not None else None
        if check is None or window_spans is None or figures is None:
            out.append(m)
            continue
        outage_s, enabled_s, _ = net_of_maintenance(
            figures.outage_seconds, figures.enabled_seconds, outages.get(check.id, []),
            window_spans, since, now)
        out.append(replace(m, uptime=replace(
            figures, outage_seconds=outage_s, enabled_seconds=enabled_s)))
    return out

