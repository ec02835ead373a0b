"""Maintenance windows in the store: the API's create, list and delete, the engine's
per-monitor load, and the windows of one monitor (statistics, status page).

Windows are account rows, for every monitor of the account (``all_monitors``) or for the
monitors in ``maintenance_window_monitors`` (a deleted monitor leaves its windows).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import asyncpg

from engine.db.base import StoreBase
from engine.db.listen import Listener, listening
from engine.db.monitors import SQL_LOCK_ACCOUNT
from engine.db.public import SQL_UPTIME_WINDOW
from engine.domain.maintenance import LOOKBACK, Window
from engine.runtime.errors import NotFound, ValidationFailed

_WINDOW_COLUMNS = """
    w.id, w.reason, w.all_monitors, w.starts_at, w.ends_at, w.weekday, w.start_time,
    w.duration_s, w.time_zone, w.created_at
"""
SQL_INSERT_WINDOW = """
INSERT INTO maintenance_windows
    (account_id, all_monitors, reason, starts_at, ends_at, weekday, start_time, duration_s,
     time_zone)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING id, created_at
"""
# Notified (no payload) whenever a window is created or deleted: the engines' calendars
# reload at once (their periodic reload is the safety net).
CHANNEL_MAINTENANCE = "upwatch_maintenance"
# Windows per account, at most: every engine holds them all and reloads them often.
MAX_WINDOWS = 200
SQL_COUNT_WINDOWS = "SELECT count(*) FROM maintenance_windows WHERE account_id = $1"
SQL_OWNED_MONITORS = """
SELECT id FROM monitors WHERE account_id = $1 AND id = ANY($2::bigint[])
"""
SQL_INSERT_WINDOW_MONITORS = """
INSERT INTO maintenance_window_monitors (window_id, monitor_id)
SELECT $1, unnest($2::bigint[])
"""
SQL_WINDOWS_OF_ACCOUNT = f"""
SELECT {_WINDOW_COLUMNS},
       array(SELECT wm.monitor_id FROM maintenance_window_monitors wm
             WHERE wm.window_id = w.id ORDER BY 1) AS monitor_ids
FROM maintenance_windows w
WHERE w.account_id = $1
ORDER BY w.id
"""
SQL_OUTAGES_OF_CHECKS = """
SELECT check_id, started_at, COALESCE(ended_at, $3) AS ended_at
FROM outages
WHERE check_id = ANY($1::bigint[]) AND (ended_at IS NULL OR ended_at > $2) AND started_at < $3
"""
SQL_DELETE_WINDOW = "DELETE FROM maintenance_windows WHERE id = $1 AND account_id = $2"
# What the engine needs, for windows that are weekly or end after $1: (monitor, window) of
# the listed monitors, and (account, window) of account-wide windows (one row each, however
# many monitors the account has).
SQL_WINDOWS_FOR_ENGINE = f"""
SELECT wm.monitor_id, NULL::bigint AS account_id, {_WINDOW_COLUMNS}
FROM maintenance_window_monitors wm
JOIN maintenance_windows w ON w.id = wm.window_id
WHERE NOT w.all_monitors AND (w.ends_at IS NULL OR w.ends_at > $1)
UNION ALL
SELECT NULL::bigint, w.account_id, {_WINDOW_COLUMNS}
FROM maintenance_windows w
WHERE w.all_monitors AND (w.ends_at IS NULL OR w.ends_at > $1)
"""
# One monitor's windows (one-off ones ending after $2).
SQL_WINDOWS_OF_MONITOR = f"""
SELECT {_WINDOW_COLUMNS}
FROM maintenance_windows w
JOIN monitors m ON m.account_id = w.account_id
WHERE m.id = $1 AND (w.ends_at IS NULL OR w.ends_at > $2)
  AND (w.all_monitors OR EXISTS (
      SELECT 1 FROM maintenance_window_monitors wm
      WHERE wm.window_id = w.id AND wm.monitor_id = m.id))
ORDER BY w.id
"""


def window_of(row: asyncpg.Record, monitor_ids: Sequence[int] | None = None) -> Window:
    return Window(
        id=row["id"],
        reason=row["reason"],
        monitor_ids=None if row["all_monitors"] else tuple(monitor_ids or ()),
        starts_at=row["starts_at"],
        ends_at=row["ends_at"],
        weekday=row["weekday"],
        start_time=row["start_time"],
        duration_s=row["duration_s"],
        time_zone=row["time_zone"],
        created_at=row["created_at"],
    )


class MaintenanceMixin(StoreBase):
    async def create_window(self, account_id: int, window: Window) -> Window:
        """``window`` (validated by the caller; its ``id`` is ignored) for the account; with
        ``monitor_ids`` None it covers every monitor of the account. A monitor that is not
        the account's is a 422 under ``monitors`` (the same whether it exists or not); past
        ``MAX_WINDOWS`` windows a 422 under ``maintenance_limit``. Returns the window with
        its id."""
        w = window
        async with self._tx() as conn:
            # Serialises creates of one account, so that the limit holds.
            if await conn.fetchval(SQL_LOCK_ACCOUNT, account_id) is None:
                raise NotFound("Account not found.")
            if await conn.fetchval(SQL_COUNT_WINDOWS, account_id) >= MAX_WINDOWS:
                raise ValidationFailed({"maintenance_limit": [
                    f"The account has reached its limit of {MAX_WINDOWS} maintenance windows."
                ]})
            ids = sorted(set(w.monitor_ids or ()))
            if w.monitor_ids is not None:
                owned = {r["id"] for r in await conn.fetch(SQL_OWNED_MONITORS, account_id, ids)}
                unknown = [i for i in ids if i not in owned]
                if unknown or not ids:
                    raise ValidationFailed({"monitors": [
                        "Unknown monitor id(s): " + ", ".join(str(i) for i in unknown) + "."
                    ]})
            row = await conn.fetchrow(
                SQL_INSERT_WINDOW, account_id, w.monitor_ids is None, w.reason, w.starts_at,
                w.ends_at, w.weekday, w.start_time, w.duration_s, w.time_zone,
            )
            assert row is not None
            if ids:
                await conn.execute(SQL_INSERT_WINDOW_MONITORS, row["id"], ids)
            await self._notify(conn, CHANNEL_MAINTENANCE)
        return replace(w, id=row["id"], created_at=row["created_at"],
                       monitor_ids=None if w.monitor_ids is None else tuple(ids))

    async def list_windows(self, account_id: int) -> list[Window]:
        rows = await self._fetch(SQL_WINDOWS_OF_ACCOUNT, account_id)
        return [window_of(r, r["monitor_ids"]) for r in rows]

    async def delete_window(self, account_id: int, window_id: int) -> None:
        """NotFound when the window is not the account's."""
        async with self._tx() as conn:
            status = await conn.execute(SQL_DELETE_WINDOW, window_id, account_id)
            if status.endswith(" 0"):
                raise NotFound("Maintenance window not found.")
            await self._notify(conn, CHANNEL_MAINTENANCE)

    @contextlib.asynccontextmanager
    async def listen_maintenance(self, on_change: Callable[[], None]) -> AsyncIterator[Listener]:
        """LISTEN on ``upwatch_maintenance`` on a connection held from the pool for the
        block; ``on_change()`` runs for every notification. The yielded :class:`Listener`
        tells when the connection is lost (notifications sent meanwhile are gone: reload)."""

        def callback(_conn: Any, _pid: int, _channel: str, _payload: str) -> None:
            on_change()

        async with listening(self._conn(), CHANNEL_MAINTENANCE, callback) as listener:
            yield listener

    async def outage_spans(
        self, check_ids: list[int], since: datetime, now: datetime
    ) -> dict[int, list[tuple[datetime, datetime]]]:
        """The checks' outages touching ``[since, now)``, an open one ending at ``now``."""
        out: dict[int, list[tuple[datetime, datetime]]] = {}
        for r in await self._fetch(SQL_OUTAGES_OF_CHECKS, check_ids, since, now):
            out.setdefault(r["check_id"], []).append((r["started_at"], r["ended_at"]))
        return out

    async def uptime_inputs(
        self, check_id: int, since: datetime, now: datetime
    ) -> tuple[int, float, float]:
        """(probes, outage seconds, enabled seconds) of the uptime check in ``[since, now]``:
        what the status page's 30-day uptime is computed from."""
        row = await self._fetchrow(SQL_UPTIME_WINDOW, check_id, since, now)
        assert row is not None  # an aggregate-only SELECT always returns one row
        return int(row["probes"]), float(row["outage_seconds"]), float(row["enabled_seconds"])

    async def windows_for_engine(
        self, now: datetime
    ) -> tuple[dict[int, list[Window]], dict[int, list[Window]]]:
        """The windows that can still matter at ``now`` (the engine's calendar): by monitor
        (listed monitors) and by account (account-wide windows)."""
        rows = await self._fetch(SQL_WINDOWS_FOR_ENGINE, now - LOOKBACK)
        by_monitor: dict[int, list[Window]] = {}
        by_account: dict[int, list[Window]] = {}
        for r in rows:
            if r["monitor_id"] is not None:
                by_monitor.setdefault(r["monitor_id"], []).append(window_of(r))
            else:
                by_account.setdefault(r["account_id"], []).append(window_of(r))
        return by_monitor, by_account

    async def windows_of_monitor(self, monitor_id: int, since: datetime) -> list[Window]:
        """The monitor's windows, one-off ones only if they end after ``since``."""
        rows = await self._fetch(SQL_WINDOWS_OF_MONITOR, monitor_id, since)
        return [window_of(r) for r in rows]
