"""Monitors and checks as the API changes them: create, update, delete, enable, disable
(their reads are :mod:`engine.db.monitor_reads`).

Every method takes the account id and only ever touches that account's rows: a monitor or
check of another account raises :class:`NotFound` exactly like a missing one.

Every configuration change (create, URL, interval, threshold, enable, disable, delete) bumps
``checks.config_version`` and queues ``NOTIFY upwatch_checks, '<check id>'`` in the same
transaction, so the engine reloads the check on commit and discards the result of a probe
that started under the old configuration. Writers of one check serialise on its row
(``SELECT ... FOR UPDATE``).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from engine.db.base import CHANNEL_CHECKS
from engine.db.monitor_reads import (
    _CHECK_COLUMNS,
    _MONITOR_COLUMNS,
    SQL_COUNT_MONITORS,
    MonitorReadsMixin,
)
from engine.db.monitor_records import CheckRecord, MonitorRecord
from engine.monitors.checkset import UPTIME, checks_of, enabled_on_create
from engine.monitors.domain_settings import interval_on_create, stored_thresholds
from engine.runtime.errors import LimitReached, NotFound

IDENTIFIER_BYTES = 9  # secrets.token_urlsafe(9): 12 URL-safe characters, 72 random bits
_IDENTIFIER_TRIES = 5


_BUMP = "config_version = c.config_version + 1, updated_at = now()"


def _checks_changed(where: str, *assignments: str) -> str:
    """``UPDATE checks AS c``: the checks ``where`` selects get ``assignments`` and a new
    ``config_version`` (the engine reloads them and discards probes started before), and
    are returned with the columns of their records."""
    sets = ",\n    ".join((*assignments, _BUMP))
    return f"""
UPDATE checks AS c
SET {sets}
WHERE {where}
RETURNING {_CHECK_COLUMNS}
"""


# --- create --------------------------------------------------------------------------------

# FOR NO KEY UPDATE serialises creates of one account (so two at once cannot both pass the
# monitor limit) without blocking foreign-key checks against the account row.
SQL_LOCK_ACCOUNT = "SELECT id FROM accounts WHERE id = $1 FOR NO KEY UPDATE"

SQL_INSERT_MONITOR = f"""
INSERT INTO monitors AS m (account_id, identifier, alias, url, scheme, host, port, request,
                           assertions)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (identifier) DO NOTHING
RETURNING {_MONITOR_COLUMNS}
"""

# Checks of monitor $1 by kind $2, with interval $3, threshold $4 and enabled $5 (pending)
# or not (paused), in the order given.
SQL_INSERT_CHECKS = f"""
INSERT INTO checks AS c (monitor_id, kind, interval_s, notification_threshold_s, is_enabled,
                         status)
SELECT $1, k.kind, k.interval_s, k.threshold_s, k.enabled,
       CASE WHEN k.enabled THEN 'pending' ELSE 'paused' END
FROM unnest($2::text[], $3::int[], $4::int[], $5::bool[]) WITH ORDINALITY
     AS k(kind, interval_s, threshold_s, enabled, n)
ORDER BY k.n
RETURNING {_CHECK_COLUMNS}
"""

# ON CONFLICT: the partial unique index allows one open period per check.
SQL_OPEN_PERIODS = """
INSERT INTO check_periods (check_id, started_at)
SELECT id, clock_timestamp() FROM unnest($1::bigint[]) AS ids(id)
ON CONFLICT DO NOTHING
"""

# --- update and delete of a monitor --------------------------------------------------------

SQL_LOCK_MONITOR = f"""
SELECT {_MONITOR_COLUMNS} FROM monitors m WHERE m.account_id = $1 AND m.id = $2 FOR UPDATE
"""

SQL_LOCK_CHECKS_OF_MONITOR = f"""
SELECT {_CHECK_COLUMNS} FROM checks c WHERE c.monitor_id = $1 ORDER BY c.id FOR UPDATE
"""

SQL_UPDATE_MONITOR = f"""
UPDATE monitors AS m
SET alias = $2, url = $3, scheme = $4, host = $5, port = $6, request = $7, assertions = $8,
    updated_at = now()
WHERE m.id = $1
RETURNING {_MONITOR_COLUMNS}
"""

SQL_RESUME_HEARTBEAT = """
UPDATE heartbeats SET last_ping_at = NULL, last_success_at = NULL, last_failure_at = NULL,
    failure_reason = NULL, runs = '{}'::jsonb
WHERE check_id = $1
"""

SQL_DELETE_PROBE_RESULTS = "DELETE FROM probe_results WHERE check_id = ANY($1::bigint[])"
SQL_DELETE_ROLLUPS = "DELETE FROM check_rollups_hourly WHERE check_id = ANY($1::bigint[])"
SQL_DELETE_OUTAGES = "DELETE FROM outages WHERE check_id = ANY($1::bigint[])"
SQL_DELETE_PERIODS = "DELETE FROM check_periods WHERE check_id = ANY($1::bigint[])"
SQL_DELETE_CERTIFICATES = "DELETE FROM check_certificates WHERE check_id = ANY($1::bigint[])"
SQL_DELETE_PHASE_HOURS = (
    "DELETE FROM check_phase_rollups_hourly WHERE check_id = ANY($1::bigint[])")
SQL_DELETE_PHASE_DAYS = "DELETE FROM check_phase_rollups_daily WHERE check_id = ANY($1::bigint[])"

# A new host is a new site: the state machine starts over (paused checks stay paused).
SQL_RESET_CHECKS = _checks_changed(
    "c.monitor_id = $1",
    "status = CASE WHEN c.is_enabled THEN 'pending' ELSE 'paused' END",
    "error = NULL, last_check_at = NULL, meta = '{}'::jsonb",
    "failing_since = NULL, detected_by = NULL, outage_id = NULL, recovering_since = NULL",
    "incident_event_id = NULL, renewal_notified_for = NULL, renewal_notified_fingerprints = '{}'",
)

SQL_OPEN_PERIODS_OF_ENABLED = """
INSERT INTO check_periods (check_id, started_at)
SELECT id, clock_timestamp() FROM checks WHERE monitor_id = $1 AND is_enabled
ON CONFLICT DO NOTHING
"""

SQL_BUMP_CHECKS_OF_MONITOR = _checks_changed("c.monitor_id = $1")

SQL_DELETE_MONITOR = "DELETE FROM monitors WHERE id = $1"
SQL_DELETE_CHECKS = "DELETE FROM checks WHERE id = ANY($1::bigint[])"

# --- checks --------------------------------------------------------------------------------

SQL_LOCK_CHECK = f"""
SELECT {_CHECK_COLUMNS}
FROM checks c JOIN monitors m ON m.id = c.monitor_id
WHERE c.id = $1 AND m.account_id = $2
FOR UPDATE OF c
"""

SQL_UPDATE_CHECK_CONFIG = _checks_changed(
    "c.id = $1",
    "interval_s = $2, notification_threshold_s = $3, recovery_threshold_s = $4",
    "expiry_threshold_percent = $5, expiry_threshold_days = $6",
)

# Disabling ends the episode: no alert may fire for a paused check, and re-enabling starts
# a fresh one. Last results (last_check_at, meta) stay as history.
SQL_DISABLE_CHECK = _checks_changed(
    "c.id = $1",
    "is_enabled = false, status = 'paused', error = NULL",
    "failing_since = NULL, detected_by = NULL, outage_id = NULL, incident_event_id = NULL",
    "recovering_since = NULL",
)

SQL_ENABLE_CHECK = _checks_changed(
    "c.id = $1", "is_enabled = true, status = 'pending', error = NULL")

SQL_CLOSE_PERIOD = """
UPDATE check_periods SET ended_at = clock_timestamp() WHERE check_id = $1 AND ended_at IS NULL
"""
# The engine cannot close an outage of a paused check (its writes are fenced by
# config_version), so disabling closes it: paused time is not downtime.
SQL_CLOSE_OUTAGE = """
UPDATE outages SET ended_at = clock_timestamp() WHERE check_id = $1 AND ended_at IS NULL
"""
SQL_OPEN_PERIOD = """
INSERT INTO check_periods (check_id, started_at) VALUES ($1, clock_timestamp())
ON CONFLICT DO NOTHING
"""


async def _follow_check_set(
    conn: Any, monitor_id: int, checks: list[CheckRecord], want: Sequence[str], scheme: str,
    interval: int,
) -> list[CheckRecord]:
    """The monitor's checks made ``want``: those it no longer has deleted with their
    history, those it gains created as on create (at ``interval``, no threshold)."""
    gone = [c.id for c in checks if c.kind not in want]
    if gone:
        await conn.execute(SQL_DELETE_PROBE_RESULTS, gone)
        await conn.execute(SQL_DELETE_CHECKS, gone)
    have = {c.kind for c in checks}
    new = [k for k in want if k not in have]
    added: list[CheckRecord] = []
    if new:
        added = [CheckRecord.from_row(r) for r in await conn.fetch(
            SQL_INSERT_CHECKS, monitor_id, new, [interval_on_create(k, interval) for k in new],
            [0] * len(new),
            [enabled_on_create(k, scheme) for k in new])]
        await conn.execute(SQL_OPEN_PERIODS, [c.id for c in added if c.is_enabled])
    return [c for c in checks if c.id not in gone] + added


# Period and outage boundaries use clock_timestamp(), not now(): now() is when the
# transaction began, and a toggle that waited for the row lock would otherwise stamp a time
# before the one it waited for, making enabled periods overlap.


class MonitorsMixin(MonitorReadsMixin):
    """The writes of monitors and checks, with the reads they build on."""

    async def create_monitor(
        self,
        account_id: int,
        *,
        url: str,
        scheme: str,
        host: str,
        port: str,
        alias: str,
        interval: int,
        notification_threshold: int,
        certificate_interval: int,
        monitor_limit: int,
        request: Any = None,
        assertions: Any = None,
        kinds: Sequence[str] | None = None,
    ) -> MonitorRecord:
        """Create a monitor with its checks (``kinds``; None: those
        ``checkset.checks_of`` gives its URL): an enabled, pending uptime check
        (``interval``, ``notification_threshold``), the others at ``certificate_interval``
        with no threshold, enabled (pending) or paused as ``checkset.enabled_on_create``
        says (a certificate check: paused for an http URL), each enabled one with an open
        enabled period, and notify the engine.

        Raises LimitReached when the account already has ``monitor_limit`` monitors, and
        NotFound when the account no longer exists. ``request``/``assertions``: stored
        forms (engine/monitors/requests.py), or None.
        The identifier is random (``secrets.token_urlsafe``), retried on a collision.
        """
        async with self._tx() as conn:
            if await conn.fetchval(SQL_LOCK_ACCOUNT, account_id) is None:
                raise NotFound("Account not found.")  # deleted since it authenticated
            count = await conn.fetchval(SQL_COUNT_MONITORS, account_id)
            if count >= monitor_limit:
                raise LimitReached(
                    f"The account has reached its limit of {monitor_limit} monitors.")
            monitor = None
            for _ in range(_IDENTIFIER_TRIES):
                identifier = secrets.token_urlsafe(IDENTIFIER_BYTES)
                monitor = await conn.fetchrow(
                    SQL_INSERT_MONITOR, account_id, identifier, alias, url, scheme, host, port,
                    request, assertions)
                if monitor is not None:
                    break
            if monitor is None:  # 72 random bits colliding five times: something is broken
                raise RuntimeError("could not allocate a unique monitor identifier")
            chosen = list(checks_of(scheme, host) if kinds is None else kinds)
            uptime = [k == UPTIME for k in chosen]
            check_rows = await conn.fetch(
                SQL_INSERT_CHECKS, monitor["id"], chosen,
                [interval if up else interval_on_create(k, certificate_interval)
                 for k, up in zip(chosen, uptime, strict=True)],
                [notification_threshold if up else 0 for up in uptime],
                [up or enabled_on_create(k, scheme) for k, up in zip(chosen, uptime, strict=True)])
            checks = [CheckRecord.from_row(r) for r in check_rows]
            await conn.execute(SQL_OPEN_PERIODS, [c.id for c in checks if c.is_enabled])
            for c in checks:
                await self._notify(conn, CHANNEL_CHECKS, str(c.id))
        return MonitorRecord.from_rows(monitor, checks)

    async def update_monitor(
        self,
        account_id: int,
        monitor_id: int,
        *,
        alias: str | None = None,
        url: str | None = None,
        scheme: str | None = None,
        host: str | None = None,
        port: str | None = None,
        config: tuple[Any, Any] | None = None,
        new_check_interval: int = 3600,
    ) -> MonitorRecord:
        """Change the alias and/or URL (``url``, ``scheme``, ``host``, ``port`` together).

        A URL whose scheme gives the monitor another set of checks (``checkset.checks_of``)
        deletes the checks it loses with their history and creates those it gains as on
        create (at ``new_check_interval``).

        A new host deletes both checks' probe results, rollups, outages and periods, puts
        enabled checks back to pending with fresh periods and clears their state. Any other
        URL change keeps history. Either way a URL change bumps ``config_version`` and
        notifies; an alias change only notifies (payloads carry the alias). NotFound when
        the monitor is not the account's. ``config``: the new stored ``(request,
        assertions)``; a change of them bumps ``config_version`` like a URL change.
        """
        async with self._tx() as conn:
            current = await conn.fetchrow(SQL_LOCK_MONITOR, account_id, monitor_id)
            if current is None:
                raise NotFound("Monitor not found.")
            check_rows = await conn.fetch(SQL_LOCK_CHECKS_OF_MONITOR, monitor_id)
            checks = [CheckRecord.from_row(r) for r in check_rows]
            check_ids = [c.id for c in checks]
            new_alias = alias if alias is not None else current["alias"]
            if url is None:
                url, scheme, host, port = (
                    current["url"], current["scheme"], current["host"], current["port"])
            url_changed = url != current["url"]
            old_config = (current["request"], current["assertions"])
            new_config = old_config if config is None else config
            if new_config != old_config and not url_changed:
                url_changed = True  # the engine reloads: same bump, history kept
            if not url_changed and new_alias == current["alias"]:
                return MonitorRecord.from_rows(current, checks)
            monitor = await conn.fetchrow(
                SQL_UPDATE_MONITOR, monitor_id, new_alias, url, scheme, host, port,
                *new_config)
            if url_changed and host != current["host"]:
                for sql in (SQL_DELETE_PROBE_RESULTS, SQL_DELETE_ROLLUPS,
                            SQL_DELETE_OUTAGES, SQL_DELETE_PERIODS, SQL_DELETE_CERTIFICATES,
                            SQL_DELETE_PHASE_HOURS, SQL_DELETE_PHASE_DAYS):
                    await conn.execute(sql, check_ids)
                check_rows = await conn.fetch(SQL_RESET_CHECKS, monitor_id)
                await conn.execute(SQL_OPEN_PERIODS_OF_ENABLED, monitor_id)
            elif url_changed:
                check_rows = await conn.fetch(SQL_BUMP_CHECKS_OF_MONITOR, monitor_id)
            assert scheme is not None and host is not None
            checks = await _follow_check_set(
                conn, monitor_id, [CheckRecord.from_row(r) for r in check_rows],
                checks_of(scheme, host), scheme, new_check_interval)
            check_ids = sorted({*check_ids, *(c.id for c in checks)})
            for check_id in check_ids:
                await self._notify(conn, CHANNEL_CHECKS, str(check_id))
        return MonitorRecord.from_rows(monitor, checks)

    async def delete_monitor(self, account_id: int, monitor_id: int) -> None:
        """Delete the monitor with its checks and all their history (the schema cascades,
        raw probe results have no foreign key and are deleted here) and notify the engine
        for each check. NotFound when the monitor is not the account's."""
        async with self._tx() as conn:
            current = await conn.fetchrow(SQL_LOCK_MONITOR, account_id, monitor_id)
            if current is None:
                raise NotFound("Monitor not found.")
            check_rows = await conn.fetch(SQL_LOCK_CHECKS_OF_MONITOR, monitor_id)
            check_ids = [r["id"] for r in check_rows]
            await conn.execute(SQL_DELETE_PROBE_RESULTS, check_ids)
            await conn.execute(SQL_DELETE_MONITOR, monitor_id)
            for check_id in check_ids:
                await self._notify(conn, CHANNEL_CHECKS, str(check_id))

    async def update_check(
        self,
        account_id: int,
        check_id: int,
        *,
        interval: int | None = None,
        notification_threshold_s: int | None = None,
        recovery_threshold_s: int | None = None,
        expiry_threshold_percent: int | None = None,
        expiry_threshold_days: tuple[int, ...] | None = None,
    ) -> CheckRecord:
        """Set the interval and/or threshold (seconds; for a certificate check the expiry
        threshold in days x 86400), the recovery threshold (s), the expiry threshold in
        percent or a domain check's thresholds (days); None leaves a value as it is.
        Nothing changes, and no version is bumped, when the values are already those.
        NotFound when the check is not the account's."""
        async with self._tx() as conn:
            row = await conn.fetchrow(SQL_LOCK_CHECK, check_id, account_id)
            if row is None:
                raise NotFound("Check not found.")
            check = CheckRecord.from_row(row)
            new_interval = check.interval if interval is None else interval
            new_threshold = (
                check.notification_threshold
                if notification_threshold_s is None
                else notification_threshold_s
            )
            new_recovery = (
                check.recovery_threshold if recovery_threshold_s is None
                else recovery_threshold_s
            )
            new_percent = (
                check.expiry_threshold_percent if expiry_threshold_percent is None
                else expiry_threshold_percent
            )
            new_days = (
                check.expiry_threshold_days if expiry_threshold_days is None
                else stored_thresholds(expiry_threshold_days)
            )
            if (new_interval, new_threshold, new_recovery, new_percent, new_days) == (
                check.interval, check.notification_threshold, check.recovery_threshold,
                check.expiry_threshold_percent, check.expiry_threshold_days,
            ):
                return check
            row = await conn.fetchrow(
                SQL_UPDATE_CHECK_CONFIG, check_id, new_interval, new_threshold, new_recovery,
                new_percent, None if new_days is None else list(new_days))
            await self._notify(conn, CHANNEL_CHECKS, str(check_id))
        assert row is not None
        return CheckRecord.from_row(row)

    async def set_check_enabled(self, account_id: int, check_id: int, enabled: bool) -> CheckRecord:
        """Enable (pending, a new enabled period; a heartbeat forgets its pings' verdict and
        waits for its next ping) or disable (paused, the open period and any open outage
        closed) a check. Idempotent: a check already in that state is returned
        unchanged. NotFound when the check is not the account's."""
        async with self._tx() as conn:
            row = await conn.fetchrow(SQL_LOCK_CHECK, check_id, account_id)
            if row is None:
                raise NotFound("Check not found.")
            if row["is_enabled"] == enabled:
                return CheckRecord.from_row(row)
            if enabled:
                row = await conn.fetchrow(SQL_ENABLE_CHECK, check_id)
                await conn.execute(SQL_OPEN_PERIOD, check_id)
                # A heartbeat starts afresh, waiting for its next ping (engine/db/heartbeats.py).
                await conn.execute(SQL_RESUME_HEARTBEAT, check_id)
            else:
                row = await conn.fetchrow(SQL_DISABLE_CHECK, check_id)
                await conn.execute(SQL_CLOSE_PERIOD, check_id)
                await conn.execute(SQL_CLOSE_OUTAGE, check_id)
            await self._notify(conn, CHANNEL_CHECKS, str(check_id))
        assert row is not None
        return CheckRecord.from_row(row)
