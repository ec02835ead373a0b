"""What the engine reads and writes: checks to schedule, result batches (written by
:mod:`engine.db.results`), state transitions with their outages and webhook events in
one transaction, and retention of raw results and rollups.

Write rules that keep the engine and the API from stepping on each other:

- Every engine write of a check row names the ``config_version`` its probe started under;
  a check the API changed, disabled or deleted meanwhile is left alone (the API wins).
- A batched status update applies only when it is newer than what the row holds
  (``last_check_at``), so a late batch never undoes a transition written directly.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg

from engine.db.base import CHANNEL_CHECKS, StoreBase
from engine.db.certificates import record_certificate
from engine.db.listen import Listener, listening
from engine.db.notifications import queue_notifications
from engine.db.results import ResultsSession
from engine.db.webhook_queue import insert_event
from engine.domain import payloads
from engine.domain.evaluate import CheckState, Transition
from engine.kinds.scheduled import ScheduledCheck, Touch

log = logging.getLogger(__name__)

# -- schedulable checks ------------------------------------------------------------------

_CHECK_COLUMNS = """
    c.id, c.monitor_id, c.kind, c.interval_s, c.notification_threshold_s, c.config_version,
    c.status, c.error, c.last_check_at, c.failing_since, c.detected_by, c.outage_id,
    c.incident_event_id, c.renewal_notified_for, o.verified_via,
    c.recovery_threshold_s, c.recovering_since, c.expiry_threshold_percent,
    c.renewal_notified_fingerprints, m.account_id, c.expiry_threshold_days,
    m.url, m.host, m.port, m.request, m.assertions,
    CASE WHEN c.kind = 'heartbeat'
         THEN (SELECT to_jsonb(h) - 'last_body' FROM heartbeats h WHERE h.check_id = c.id)
    END AS heartbeat
"""
_CHECK_FROM = """
FROM checks c
JOIN monitors m ON m.id = c.monitor_id
LEFT JOIN outages o ON o.id = c.outage_id
"""
# Keyset pages, so that loading 100,000 checks never holds one huge result or a transaction.
SQL_LOAD_CHECKS_PAGE = f"""
SELECT {_CHECK_COLUMNS} {_CHECK_FROM}
WHERE c.is_enabled AND c.id > $1
ORDER BY c.id
LIMIT $2
"""
SQL_LOAD_CHECKS_BY_ID = f"""
SELECT {_CHECK_COLUMNS} {_CHECK_FROM}
WHERE c.is_enabled AND c.id = ANY($1::bigint[])
"""
SQL_ENABLED_VERSIONS_PAGE = """
SELECT id, config_version FROM checks
WHERE is_enabled AND id > $1
ORDER BY id
LIMIT $2
"""


# -- transitions ---------------------------------------------------------------------------

SQL_LOCK_CHECK = """
SELECT c.id, m.id AS monitor_id, m.account_id, m.url, m.alias
FROM checks c JOIN monitors m ON m.id = c.monitor_id
WHERE c.id = $1 AND c.config_version = $2 AND c.is_enabled
FOR UPDATE OF c
"""
SQL_OPEN_OUTAGE = """
INSERT INTO outages (check_id, started_at, http_status_code, error, detected_by, verified_via,
                     alerted)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING id
"""
SQL_CLOSE_OUTAGE = "UPDATE outages SET ended_at = $2 WHERE id = $1 AND ended_at IS NULL"
SQL_ALERT_OUTAGE = "UPDATE outages SET alerted = true WHERE id = $1"
SQL_WRITE_STATE = """
UPDATE checks SET
    status = $2, error = $3, meta = $4::jsonb, last_check_at = $5,
    failing_since = $6, detected_by = $7, outage_id = $8, incident_event_id = $9,
    renewal_notified_for = $10, recovering_since = $11, renewal_notified_fingerprints = $12,
    state_version = state_version + 1, updated_at = now()
WHERE id = $1
"""

# -- retention -------------------------------------------------------------------------------

PARTITION_PREFIX = "probe_results_"
_PARTITION_RE = re.compile(r"^probe_results_(\d{8})$")
SQL_LIST_PARTITIONS = """
SELECT c.relname
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname = 'probe_results'
"""
# Partition names and bounds come from dates formatted here, never from input.
SQL_CREATE_PARTITION = (
    "CREATE TABLE {name} PARTITION OF probe_results FOR VALUES FROM ('{lo}') TO ('{hi}')"
)
SQL_CREATE_DETACHED = "CREATE TABLE {name} (LIKE probe_results INCLUDING DEFAULTS)"
SQL_MOVE_FROM_DEFAULT = """
WITH moved AS (
    DELETE FROM probe_results_default WHERE at >= $1 AND at < $2 RETURNING *
)
INSERT INTO {name} SELECT * FROM moved
"""
SQL_ATTACH_PARTITION = (
    "ALTER TABLE probe_results ATTACH PARTITION {name} FOR VALUES FROM ('{lo}') TO ('{hi}')"
)
SQL_DROP_PARTITION = "DROP TABLE IF EXISTS {name}"
SQL_DELETE_OLD_DEFAULT_ROWS = "DELETE FROM probe_results_default WHERE at < $1"
SQL_DELETE_OLD_ROLLUPS = "DELETE FROM check_rollups_hourly WHERE hour < $1"


# Two nodes creating the same partition: one wins, the other sees one of these.
_ALREADY_THERE = (asyncpg.DuplicateTableError, asyncpg.UniqueViolationError)


def partition_name(day: date) -> str:
    return f"{PARTITION_PREFIX}{day:%Y%m%d}"


def _bound(day: date) -> str:
    return f"{day:%Y-%m-%d} 00:00:00+00"


_BUILDERS: dict[str, Callable[..., bytes]] = {
    payloads.DOWNTIME: payloads.downtime,
    payloads.UPTIME_RESTORED: payloads.uptime_restored,
    payloads.CERTIFICATE_INVALID: payloads.certificate_invalid,
    payloads.CERTIFICATE_RECOVERED: payloads.certificate_recovered,
    payloads.CERTIFICATE_RENEWAL_DUE: payloads.certificate_renewal_due,
    payloads.DOMAIN_RENEWAL_DUE: payloads.domain_renewal_due,
    payloads.DOMAIN_INVALID: payloads.domain_invalid,
    payloads.DOMAIN_RECOVERED: payloads.domain_recovered,
}


class ProbingMixin(StoreBase):
    # -- loading -----------------------------------------------------------------------

    async def load_checks_page(self, after_id: int, limit: int) -> list[ScheduledCheck]:
        """Enabled checks with ``id > after_id``, by id, at most ``limit``."""
        rows = await self._fetch(SQL_LOAD_CHECKS_PAGE, after_id, limit)
        return [ScheduledCheck.from_row(r) for r in rows]

    async def load_checks(self, ids: Iterable[int]) -> list[ScheduledCheck]:
        """The enabled checks among ``ids`` (missing = deleted or disabled)."""
        rows = await self._fetch(SQL_LOAD_CHECKS_BY_ID, list(ids))
        return [ScheduledCheck.from_row(r) for r in rows]

    async def enabled_check_versions_page(
        self, after_id: int, limit: int
    ) -> list[tuple[int, int]]:
        """(id, config_version) of enabled checks with ``id > after_id``: the cheap resync."""
        rows = await self._fetch(SQL_ENABLED_VERSIONS_PAGE, after_id, limit)
        return [(r[0], r[1]) for r in rows]

    @contextlib.asynccontextmanager
    async def listen_checks(self, on_change: Callable[[int], None]) -> AsyncIterator[Listener]:
        """LISTEN on ``upwatch_checks`` on a connection held from the pool for the block.

        ``on_change(check_id)`` runs (in the event loop) for every notification. The yielded
        :class:`Listener` tells when the connection is lost; the engine then reconnects and
        resyncs in full, since notifications sent meanwhile are gone.
        """

        def callback(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            try:
                check_id = int(payload)
            except ValueError:
                return
            on_change(check_id)

        async with listening(self._conn(), CHANNEL_CHECKS, callback) as listener:
            yield listener

    # -- transitions ---------------------------------------------------------------------

    async def apply_transition(
        self, check_id: int, config_version: int, tr: Transition
    ) -> CheckState | None:
        """Write one transition in ONE transaction: the checks row, outages opened, closed
        or marked alerted, and its webhook events (bodies built now, from the monitor's
        current url and alias).

        Returns the persisted state with the ids of an opened outage and of an incident
        event filled in; None (nothing written) when the check was changed, disabled or
        deleted since ``config_version``.
        """
        state = tr.state
        async with self._tx() as conn:
            row = await conn.fetchrow(SQL_LOCK_CHECK, check_id, config_version)
            if row is None:
                return None
            if tr.close_outage_id is not None:
                await conn.execute(SQL_CLOSE_OUTAGE, tr.close_outage_id, state.last_check_at)
            if tr.open_outage is not None:
                o = tr.open_outage
                state.outage_id = await conn.fetchval(
                    SQL_OPEN_OUTAGE, check_id, o.started_at, o.http_status_code, o.error,
                    o.detected_by, o.verified_via, tr.alert_outage,
                )
            elif tr.alert_outage and state.outage_id is not None:
                await conn.execute(SQL_ALERT_OUTAGE, state.outage_id)
            if tr.certificate is not None and state.last_check_at is not None:
                await record_certificate(conn, check_id, tr.certificate, state.last_check_at)
            if tr.events:
                monitor = payloads.MonitorRef(row["monitor_id"], row["url"], row["alias"])
                for ev in tr.events:
                    body = _BUILDERS[ev.event](monitor, **ev.fields)
                    event_id = await insert_event(
                        conn,
                        account_id=row["account_id"],
                        monitor_id=row["monitor_id"],
                        check_id=check_id,
                        event=ev.event,
                        body=body,
                        parent_id=ev.parent_id,
                    )
                    if ev.opens_incident:
                        state.incident_event_id = event_id
                    # The account's notification channels, in the same transaction.
                    await queue_notifications(
                        conn, account_id=row["account_id"], monitor_id=row["monitor_id"],
                        check_id=check_id, event=ev.event, body=body,
                        since=state.failing_since,
                    )
            await conn.execute(
                # meta goes through the pool's jsonb codec (a dict, not text).
                SQL_WRITE_STATE, check_id, state.status, state.error, tr.meta,
                state.last_check_at, state.failing_since,
                state.detected_by, state.outage_id, state.incident_event_id,
                state.renewal_notified_for, state.recovering_since,
                list(state.renewal_notified_fingerprints),
            )
        return state

    # -- result batches --------------------------------------------------------------------

    def results_session(self) -> ResultsSession:
        """A :class:`ResultsSession` for the results writer (to be closed when done)."""
        return ResultsSession(self._pool)

    async def write_results(
        self, rows: Sequence[tuple[Any, ...]], touches: Mapping[int, Touch]
    ) -> None:
        """One batch (see :meth:`ResultsSession.write`) on a session of its own for the call."""
        session = self.results_session()
        try:
            await session.write(rows, touches)
        finally:
            await session.close()

    # -- retention ---------------------------------------------------------------------------

    async def result_partitions(self) -> list[date]:
        """Days that have their own probe_results partition."""
        rows = await self._fetch(SQL_LIST_PARTITIONS)
        days = []
        for r in rows:
            m = _PARTITION_RE.match(r["relname"])
            if m:
                days.append(datetime.strptime(m.group(1), "%Y%m%d").replace(tzinfo=UTC).date())
        return sorted(days)

    async def ensure_result_partitions(self, first: date, days: int) -> list[date]:
        """Create the daily partitions of ``first`` and the ``days - 1`` days after it that
        are missing; returns the days created.

        Rows that already landed in the default partition for such a day (the engine ran
        before maintenance made it) are moved into the new partition in the same
        transaction, because PostgreSQL refuses a partition the default already covers.
        """
        existing = set(await self.result_partitions())
        created = []
        for i in range(days):
            day = first + timedelta(days=i)
            if day in existing:
                continue
            name, lo, hi = partition_name(day), _bound(day), _bound(day + timedelta(days=1))
            try:
                async with self._tx() as conn:
                    await conn.execute(SQL_CREATE_PARTITION.format(name=name, lo=lo, hi=hi))
            except _ALREADY_THERE:
                continue  # another node made it
            except asyncpg.CheckViolationError:
                lo_ts = datetime.combine(day, datetime.min.time(), UTC)
                try:
                    async with self._tx() as conn:
                        await conn.execute(SQL_CREATE_DETACHED.format(name=name))
                        await conn.execute(
                            SQL_MOVE_FROM_DEFAULT.format(name=name),
                            lo_ts, lo_ts + timedelta(days=1),
                        )
                        await conn.execute(SQL_ATTACH_PARTITION.format(name=name, lo=lo, hi=hi))
                except _ALREADY_THERE:
                    continue
            created.append(day)
        return created

    async def drop_result_partitions(self, before: date) -> list[date]:
        """Drop whole daily partitions of days before ``before`` (and such rows in the
        default partition); returns the days dropped."""
        dropped = []
        for day in await self.result_partitions():
            if day < before:
                async with self._tx() as conn:
                    await conn.execute(SQL_DROP_PARTITION.format(name=partition_name(day)))
                dropped.append(day)
        await self._execute(
            SQL_DELETE_OLD_DEFAULT_ROWS, datetime.combine(before, datetime.min.time(), UTC)
        )
        return dropped

    async def delete_rollups_before(self, before: datetime) -> int:
        """Delete hourly rollups older than ``before``; returns how many."""
        status = await self._execute(SQL_DELETE_OLD_ROLLUPS, before)
        return int(status.rsplit(" ", 1)[-1]) if status.startswith("DELETE") else 0
