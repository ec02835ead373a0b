"""Monitors written many at a time: concurrent creates of one account in one transaction,
and a whole monitor set (monitors as code) applied in one transaction.

Both keep the rules of :mod:`engine.db.monitors`: an account's creates serialise on its row
(``SQL_LOCK_ACCOUNT``), so the monitor limit holds exactly however many processes create at
once; a new monitor's enabled checks start pending with an open enabled period; a new host
is a new site (history deleted, state reset); every check whose configuration changes gets
its ``config_version`` bumped and a ``NOTIFY upwatch_checks`` in the same transaction. What
changes is the number of statements: a batch costs the same handful of round trips and ONE
commit (one WAL flush) whether it holds one monitor or ten thousand, which is what lets
creates scale with concurrency while the lock is held across the commit's fsync.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

import asyncpg
import orjson

from engine.db.base import CHANNEL_CHECKS, StoreBase
from engine.db.monitor_reads import _CHECK_COLUMNS, _MONITOR_COLUMNS
from engine.db.monitor_records import CheckRecord, MonitorRecord
from engine.db.monitors import (
    _IDENTIFIER_TRIES,
    IDENTIFIER_BYTES,
    SQL_CLOSE_OUTAGE,
    SQL_CLOSE_PERIOD,
    SQL_DELETE_CHECKS,
    SQL_DELETE_OUTAGES,
    SQL_DELETE_PERIODS,
    SQL_DELETE_PROBE_RESULTS,
    SQL_DELETE_ROLLUPS,
    SQL_DISABLE_CHECK,
    SQL_ENABLE_CHECK,
    SQL_LOCK_ACCOUNT,
    SQL_OPEN_PERIODS,
    SQL_OPEN_PERIODS_OF_ENABLED,
    SQL_RESET_CHECKS,
)
from engine.monitors.plan import (
    CheckSettings,
    CurrentMonitor,
    MonitorSpec,
    Plan,
    SameRequest,
    Update,
    plan,
)
from engine.runtime.errors import LimitReached, NotFound


def _for_many(sql: str, one: str, many: str) -> str:
    """The single-row statement ``sql`` of engine.db.monitors made to take an array: one
    definition of what enabling, disabling or resetting a check means."""
    assert sql.count(one) == 1, (one, sql)
    return sql.replace(one, many)


# --- reads -------------------------------------------------------------------------------

# One row per check, by monitor then check id.
SQL_MONITOR_SET = """
SELECT m.id, m.identifier, m.key, m.alias, m.url, m.scheme, m.host, m.port,
       m.request, m.assertions,
       c.kind, c.id AS check_id, c.interval_s, c.notification_threshold_s, c.is_enabled,
       c.recovery_threshold_s, c.expiry_threshold_percent, c.expiry_threshold_days
FROM monitors m
JOIN checks c ON c.monitor_id = m.id
WHERE m.account_id = $1 AND c.kind <> 'heartbeat'  -- heartbeats: engine/db/heartbeats.py
ORDER BY m.id, c.id
"""

# --- creates -----------------------------------------------------------------------------

# Create monitors with their checks (enabled ones pending with an open enabled period,
# disabled ones paused) and notify the engine of every new check, all in ONE statement:
# outside a transaction it is one round trip and one commit for the whole batch. Item ``ord``
# (from 1) is created when the account's count under its create lock plus ``ord`` is within
# the item's limit; an item whose random identifier is taken is skipped (the caller draws
# again). Checks come as parallel arrays, each naming its item's ``ord``. ``monitors_before``
# is NULL when the account does not exist. One row per check, joined to its monitor; a row
# of NULLs but ``monitors_before`` when nothing was created.
SQL_CREATE_MONITORS = f"""
WITH g AS MATERIALIZED (SELECT upwatch_lock_monitor_count($1) AS n),
u AS MATERIALIZED (
    SELECT u.*
    FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                $8::text[], $9::bigint[], $10::text[], $11::text[]) WITH ORDINALITY
         AS u(identifier, alias, url, scheme, host, port, key, lim, request, assertions, ord)
    WHERE (SELECT n FROM g) + u.ord <= u.lim
),
m AS (
    INSERT INTO monitors AS m (account_id, identifier, alias, url, scheme, host, port, key,
                               request, assertions)
    SELECT $1, u.identifier, u.alias, u.url, u.scheme, u.host, u.port, u.key,
           u.request::jsonb, u.assertions::jsonb
    FROM u ORDER BY u.ord
    ON CONFLICT (identifier) DO NOTHING
    RETURNING {_MONITOR_COLUMNS}
),
c AS (
    INSERT INTO checks AS c (monitor_id, kind, interval_s, notification_threshold_s,
                             is_enabled, status, recovery_threshold_s,
                             expiry_threshold_percent, expiry_threshold_days)
    SELECT m.id, k.kind, k.interval_s, k.threshold_s, k.enabled,
           CASE WHEN k.enabled THEN 'pending' ELSE 'paused' END, k.recovery, k.percent,
           k.days::smallint[]
    FROM m JOIN u ON u.identifier = m.identifier
    JOIN unnest($12::bigint[], $13::text[], $14::int[], $15::int[], $16::bool[], $17::int[],
                $18::int[], $19::text[]) WITH ORDINALITY
         AS k(ord, kind, interval_s, threshold_s, enabled, recovery, percent, days, n)
      ON k.ord = u.ord
    ORDER BY u.ord, k.n
    RETURNING {_CHECK_COLUMNS}
),
periods AS (
    INSERT INTO check_periods (check_id, started_at)
    SELECT c.id, clock_timestamp() FROM c WHERE c.is_enabled
)
SELECT g.n AS monitors_before, m.*,
       {_CHECK_COLUMNS.replace("c.id,", "c.id AS check_id,", 1)},
       CASE WHEN c.id IS NOT NULL THEN pg_notify('{CHANNEL_CHECKS}', c.id::text) END
FROM g LEFT JOIN (c JOIN m ON m.id = c.monitor_id) ON true
ORDER BY m.id, c.kind DESC
"""

# Checks added to monitors (a new URL whose scheme brings a check the monitor lacked),
# enabled ones pending with an open enabled period.
SQL_ADD_CHECKS = """
WITH c AS (
    INSERT INTO checks AS c (monitor_id, kind, interval_s, notification_threshold_s,
                             is_enabled, status, recovery_threshold_s,
                             expiry_threshold_percent, expiry_threshold_days)
    SELECT k.monitor_id, k.kind, k.interval_s, k.threshold_s, k.enabled,
           CASE WHEN k.enabled THEN 'pending' ELSE 'paused' END, k.recovery, k.percent,
           k.days::smallint[]
    FROM unnest($1::bigint[], $2::text[], $3::int[], $4::int[], $5::bool[], $6::int[],
                $7::int[], $8::text[]) AS k(monitor_id, kind, interval_s, threshold_s, enabled,
                                            recovery, percent, days)
    RETURNING c.id, c.is_enabled
),
periods AS (
    INSERT INTO check_periods (check_id, started_at)
    SELECT c.id, clock_timestamp() FROM c WHERE c.is_enabled
)
SELECT id FROM c
"""

# One NOTIFY per check (the engine reloads each), sent on commit.
SQL_NOTIFY_CHECKS = "SELECT pg_notify($1, t.id::text) FROM unnest($2::bigint[]) AS t(id)"

# --- updates and deletes of a set --------------------------------------------------------

SQL_UPDATE_MONITORS = """
UPDATE monitors AS m
SET key = u.key, alias = u.alias, url = u.url, scheme = u.scheme, host = u.host,
    port = u.port, updated_at = now()
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
            $7::text[]) AS u(id, key, alias, url, scheme, host, port)
WHERE m.id = u.id
"""

# A monitor's request and assertions, stored forms (jsonb as text, see _json_or_none).
SQL_UPDATE_MONITOR_CONFIG = """
UPDATE monitors AS m
SET request = u.request::jsonb, assertions = u.assertions::jsonb, updated_at = now()
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(id, request, assertions)
WHERE m.id = u.id
"""

SQL_UPDATE_CHECK_SETTINGS = """
UPDATE checks AS c
SET interval_s = u.interval_s, notification_threshold_s = u.threshold_s,
    recovery_threshold_s = u.recovery, expiry_threshold_percent = u.percent,
    expiry_threshold_days = u.days::smallint[],
    config_version = c.config_version + 1, updated_at = now()
FROM unnest($1::bigint[], $2::int[], $3::int[], $4::int[], $5::int[], $6::text[])
     AS u(id, interval_s, threshold_s, recovery, percent, days)
WHERE c.id = u.id
"""

SQL_BUMP_CHECKS_OF_MONITORS = """
UPDATE checks AS c SET config_version = c.config_version + 1, updated_at = now()
WHERE c.monitor_id = ANY($1::bigint[])
"""

SQL_RESET_CHECKS_OF_MONITORS = _for_many(
    SQL_RESET_CHECKS, "WHERE c.monitor_id = $1", "WHERE c.monitor_id = ANY($1::bigint[])")
SQL_OPEN_PERIODS_OF_ENABLED_MONITORS = _for_many(
    SQL_OPEN_PERIODS_OF_ENABLED, "WHERE monitor_id = $1", "WHERE monitor_id = ANY($1::bigint[])")
SQL_ENABLE_CHECKS = _for_many(SQL_ENABLE_CHECK, "WHERE c.id = $1", "WHERE c.id = ANY($1::bigint[])")
SQL_DISABLE_CHECKS = _for_many(
    SQL_DISABLE_CHECK, "WHERE c.id = $1", "WHERE c.id = ANY($1::bigint[])")
SQL_CLOSE_PERIODS = _for_many(
    SQL_CLOSE_PERIOD, "WHERE check_id = $1", "WHERE check_id = ANY($1::bigint[])")
SQL_CLOSE_OUTAGES = _for_many(
    SQL_CLOSE_OUTAGE, "WHERE check_id = $1", "WHERE check_id = ANY($1::bigint[])")

SQL_DELETE_MONITORS = "DELETE FROM monitors WHERE id = ANY($1::bigint[]) AND account_id = $2"

# Rows per statement when a set is applied: bounds each statement's arrays and paces the
# progress callback.
CHUNK = 1000

Progress = Callable[[int], None]  # called with the number of entries just written
# ``(validated request, stored request or None) -> stored request``: a file's request in
# the form the store keeps (secret values encrypted; engine.monitors.requests.to_stored).
StoreRequest = Callable[[Any, Any], Any]


def _as_given(request: Any, previous: Any) -> Any:
    return request


def _settings_of(row: asyncpg.Record) -> CheckSettings:
    days = row["expiry_threshold_days"]
    return CheckSettings(row["interval_s"], row["notification_threshold_s"], row["is_enabled"],
                         recovery_s=row["recovery_threshold_s"],
                         expiry_percent=row["expiry_threshold_percent"],
                         expiry_days=None if days is None else tuple(days))


def _days_text(days: tuple[int, ...] | None) -> str | None:
    """A domain check's thresholds for a ``text[]`` parameter (cast to smallint[] in SQL:
    unnest flattens an array of arrays)."""
    return None if days is None else "{" + ",".join(map(str, days)) + "}"


def _currents_of(rows: Sequence[asyncpg.Record]) -> list[CurrentMonitor]:
    """SQL_MONITOR_SET's rows (one per check, by monitor) as monitors."""
    out: list[CurrentMonitor] = []
    start = 0
    for i in range(1, len(rows) + 1):
        if i < len(rows) and rows[i]["id"] == rows[start]["id"]:
            continue
        group, row = rows[start:i], rows[start]
        out.append(CurrentMonitor(
            id=row["id"], identifier=row["identifier"],
            check_ids={r["kind"]: r["check_id"] for r in group},
            spec=MonitorSpec(
                key=row["key"], url=row["url"], scheme=row["scheme"], host=row["host"],
                port=row["port"], alias=row["alias"],
                checks={r["kind"]: _settings_of(r) for r in group},
                request=row["request"], assertions=row["assertions"],
            ),
        ))
        start = i
    return out


def _json_or_none(value: Any) -> str | None:
    """A jsonb value for a ``text[]`` parameter (cast in SQL): asyncpg's jsonb codec is set
    for single values, and an array of them goes as text."""
    return None if value is None else orjson.dumps(value).decode()


def _record_of(rows: list[asyncpg.Record]) -> MonitorRecord:
    """One new monitor from its rows of SQL_CREATE_MONITORS (one per check)."""
    return MonitorRecord.from_rows(rows[0], [CheckRecord.from_row(r, "check_id") for r in rows])


def _chunks(items: Sequence[Any]) -> list[Sequence[Any]]:
    return [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]


class MonitorBatchesMixin(StoreBase):
    async def monitor_set(self, account_id: int) -> list[CurrentMonitor]:
        """Every monitor of the account with its checks' settings, in id order (one query,
        no figures): what export writes and apply compares against."""
        return _currents_of(await self._fetch(SQL_MONITOR_SET, account_id))

    async def create_monitors(
        self, account_id: int, items: Sequence[tuple[MonitorSpec, int]]
    ) -> list[MonitorRecord | LimitReached]:
        """Create ``(spec, monitor_limit)`` items, each as
        :meth:`~engine.db.monitors.MonitorsMixin.create_monitor` would, in ONE statement
        and so one commit (durable when this returns): an item that would take the account
        past its limit gets LimitReached in its place and the rest are created. NotFound
        when the account no longer exists."""
        async with self._conn() as conn:
            return await self._insert_monitors(conn, account_id, items)

    async def apply_monitor_set(
        self,
        account_id: int,
        desired: Sequence[MonitorSpec],
        *,
        prune: bool,
        monitor_limit: int,
        verify: Callable[[Plan], Awaitable[None]] | None = None,
        progress: Progress | None = None,
        same_request: SameRequest | None = None,
        store_request: StoreRequest = _as_given,
    ) -> tuple[Plan, dict[int, int]]:
        """Make the account's monitors match ``desired`` (engine.monitors.plan) in ONE
        transaction, under the account's create lock. ``verify(plan)`` runs on the plan made
        under the lock before anything is written and may raise to write nothing (the
        private-address rule). Returns the plan carried out and the new monitors' ids by
        entry index. LimitReached (nothing written) when creates would take the account past
        ``monitor_limit``; NotFound when the account no longer exists. ``same_request`` and
        ``store_request`` compare and store the specs' requests (engine.monitors.requests: they
        need the secret key); without them requests are compared and stored as given."""
        async with self._tx() as conn:
            if await conn.fetchval(SQL_LOCK_ACCOUNT, account_id) is None:
                raise NotFound("Account not found.")
            current = _currents_of(await conn.fetch(SQL_MONITOR_SET, account_id))
            todo = (plan(current, desired, prune=prune) if same_request is None
                    else plan(current, desired, prune=prune, same_request=same_request))
            over = todo.over_limit(len(current), monitor_limit)
            if over is not None:
                raise LimitReached(over)
            if verify is not None:
                await verify(todo)
            if todo.empty:
                return todo, {}
            notify: list[int] = []
            await self._delete_monitors(conn, account_id, todo.deletes, notify, progress)
            created = await self._create_entries(
                conn, account_id, todo, monitor_limit, progress, store_request)
            await self._update_monitors(conn, todo, notify, progress, store_request)
            await conn.execute(SQL_NOTIFY_CHECKS, CHANNEL_CHECKS, sorted(set(notify)))
        return todo, created

    # --- private helpers: each takes the connection of the caller's transaction ----------

    async def _insert_monitors(
        self, conn: asyncpg.Connection, account_id: int,
        items: Sequence[tuple[MonitorSpec, int]],
    ) -> list[MonitorRecord | LimitReached]:
        """SQL_CREATE_MONITORS for ``items`` (in the caller's transaction, or as its own),
        again for any whose random identifier was taken; results in the order of items."""
        out: list[MonitorRecord | LimitReached | None] = [None] * len(items)
        pending = list(range(len(items)))
        for _ in range(_IDENTIFIER_TRIES):
            if not pending:
                break
            identifiers = [secrets.token_urlsafe(IDENTIFIER_BYTES) for _ in pending]
            specs = [items[i][0] for i in pending]
            checks = [(n, kind, c) for n, s in enumerate(specs, 1)
                      for kind, c in s.checks.items()]
            rows = await conn.fetch(
                SQL_CREATE_MONITORS, account_id, identifiers,
                [s.alias for s in specs], [s.url for s in specs], [s.scheme for s in specs],
                [s.host for s in specs], [s.port for s in specs], [s.key for s in specs],
                [items[i][1] for i in pending],
                [_json_or_none(s.request) for s in specs],
                [_json_or_none(s.assertions) for s in specs],
                [n for n, _, _ in checks], [k for _, k, _ in checks],
                [c.interval for _, _, c in checks], [c.threshold_s for _, _, c in checks],
                [bool(c.enabled) for _, _, c in checks], [c.recovery_s for _, _, c in checks],
                [c.expiry_percent for _, _, c in checks],
                [_days_text(c.expiry_days) for _, _, c in checks])
            before = rows[0]["monitors_before"]
            if before is None:
                raise NotFound("Account not found.")  # deleted since it authenticated
            made: dict[str, MonitorRecord] = {}
            group: list[asyncpg.Record] = []
            for row in rows:
                if row["id"] is None:
                    continue
                if group and row["id"] != group[0]["id"]:
                    made[group[0]["identifier"]] = _record_of(group)
                    group = []
                group.append(row)
            if group:
                made[group[0]["identifier"]] = _record_of(group)
            missed = []
            for n, (i, identifier) in enumerate(zip(pending, identifiers, strict=True)):
                limit = items[i][1]
                if identifier in made:
                    out[i] = made[identifier]
                elif before + n + 1 > limit:
                    out[i] = LimitReached(
                        f"The account has reached its limit of {limit} monitors.")
                else:  # identifier taken: draw another
                    missed.append(i)
            pending = missed
        if pending:  # 72 random bits colliding five times: something is broken
            raise RuntimeError("could not allocate unique monitor identifiers")
        return [r for r in out if r is not None]

    async def _delete_monitors(
        self, conn: asyncpg.Connection, account_id: int, deletes: Sequence[CurrentMonitor],
        notify: list[int], progress: Progress | None,
    ) -> None:
        for chunk in _chunks(deletes):
            check_ids = [c for m in chunk for c in m.check_ids.values()]
            await conn.execute(SQL_DELETE_PROBE_RESULTS, check_ids)
            await conn.execute(SQL_DELETE_MONITORS, [m.id for m in chunk], account_id)
            notify += check_ids
            if progress is not None:
                progress(len(chunk))

    async def _create_entries(
        self, conn: asyncpg.Connection, account_id: int, todo: Plan, limit: int,
        progress: Progress | None, store_request: StoreRequest,
    ) -> dict[int, int]:
        created: dict[int, int] = {}
        for chunk in _chunks(todo.creates):
            specs = [s if s.request is None else replace(s, request=store_request(s.request, None))
                     for _, s in chunk]
            records = await self._insert_monitors(
                conn, account_id, [(s, limit) for s in specs])
            for (index, _), record in zip(chunk, records, strict=True):
                if isinstance(record, LimitReached):  # counted under the same lock before
                    raise record
                created[index] = record.id
            if progress is not None:
                progress(len(chunk))
        return created

    async def _update_monitors(
        self, conn: asyncpg.Connection, todo: Plan, notify: list[int],
        progress: Progress | None, store_request: StoreRequest,
    ) -> None:
        for chunk in _chunks(todo.updates):
            rows = [u for u in chunk if {"key", "url", "alias"} & set(u.changes)]
            if rows:
                await conn.execute(
                    SQL_UPDATE_MONITORS, [u.current.id for u in rows],
                    [u.desired.key for u in rows], [u.desired.alias for u in rows],
                    [u.desired.url for u in rows], [u.desired.scheme for u in rows],
                    [u.desired.host for u in rows], [u.desired.port for u in rows])
            # A new host is a new site: history goes, state starts over.
            new_host = [u for u in chunk if u.host_changed]
            if new_host:
                check_ids = [c for u in new_host for c in u.current.check_ids.values()]
                for sql in (SQL_DELETE_PROBE_RESULTS, SQL_DELETE_ROLLUPS,
                            SQL_DELETE_OUTAGES, SQL_DELETE_PERIODS):
                    await conn.execute(sql, check_ids)
                monitor_ids = [u.current.id for u in new_host]
                await conn.execute(SQL_RESET_CHECKS_OF_MONITORS, monitor_ids)
                await conn.execute(SQL_OPEN_PERIODS_OF_ENABLED_MONITORS, monitor_ids)
            configs = [u for u in chunk if {"request", "assertions"} & set(u.changes)]
            if configs:
                await conn.execute(
                    SQL_UPDATE_MONITOR_CONFIG, [u.current.id for u in configs],
                    [_json_or_none(None if u.desired.request is None else store_request(
                        u.desired.request, u.current.spec.request)) for u in configs],
                    [_json_or_none(u.desired.assertions or None) for u in configs])
            # A changed URL (same host) or request makes the engine reload the checks, as
            # the API's update does; a new host has already reset them.
            same_host = [u.current.id for u in chunk if not u.host_changed and (
                u.url_changed or {"request", "assertions"} & set(u.changes))]
            if same_host:
                await conn.execute(SQL_BUMP_CHECKS_OF_MONITORS, same_host)
            await self._change_check_sets(conn, chunk, notify)
            settings: list[tuple[int, CheckSettings]] = []
            enable: list[int] = []
            disable: list[int] = []
            for u in chunk:
                for kind, check_id in u.current.check_ids.items():
                    cur, des = u.current.spec.checks[kind], u.desired.checks.get(kind)
                    if des is None:
                        continue  # dropped above
                    # Every setting but ``enabled`` (enabling and disabling come below).
                    if replace(cur, enabled=des.enabled) != des:
                        settings.append((check_id, des))
                    if cur.enabled != des.enabled:
                        (enable if des.enabled else disable).append(check_id)
            if settings:
                await conn.execute(
                    SQL_UPDATE_CHECK_SETTINGS, [c for c, _ in settings],
                    [s.interval for _, s in settings], [s.threshold_s for _, s in settings],
                    [s.recovery_s for _, s in settings],
                    [s.expiry_percent for _, s in settings],
                    [_days_text(s.expiry_days) for _, s in settings])
            if enable:
                await conn.execute(SQL_ENABLE_CHECKS, enable)
                await conn.execute(SQL_OPEN_PERIODS, enable)
            if disable:
                await conn.execute(SQL_DISABLE_CHECKS, disable)
                await conn.execute(SQL_CLOSE_PERIODS, disable)
                await conn.execute(SQL_CLOSE_OUTAGES, disable)
            notify += [c for u in chunk for c in u.current.check_ids.values()]
            if progress is not None:
                progress(len(chunk))

    async def _change_check_sets(
        self, conn: asyncpg.Connection, chunk: Sequence[Update], notify: list[int],
    ) -> None:
        """Monitors whose new URL brings a different set of checks: the checks they lose
        are deleted with their history, those they gain are created as on create."""
        gone = [u.current.check_ids[k] for u in chunk for k in u.current.check_ids
                if k not in u.desired.checks]
        if gone:
            await conn.execute(SQL_DELETE_PROBE_RESULTS, gone)
            await conn.execute(SQL_DELETE_CHECKS, gone)
            notify += gone
        new = [(u.current.id, k, c) for u in chunk for k, c in u.desired.checks.items()
               if k not in u.current.check_ids]
        if new:
            rows = await conn.fetch(
                SQL_ADD_CHECKS, [m for m, _, _ in new], [k for _, k, _ in new],
                [c.interval for _, _, c in new], [c.threshold_s for _, _, c in new],
                [bool(c.enabled) for _, _, c in new], [c.recovery_s for _, _, c in new],
                [c.expiry_percent for _, _, c in new],
                [_days_text(c.expiry_days) for _, _, c in new])
            notify += [r["id"] for r in rows]
