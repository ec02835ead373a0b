"""What the engine reads and writes: checks to schedule, result batches (COPY + rollups +
batched "last checked" updates), state transitions with their outages and webhook events in
one transaction, and retention of raw results and rollups.

Write rules that keep the engine and the API from stepping on each other:

- Every engine write of a check row names the ``config_version`` its probe started under;
  a check the API changed, disabled or deleted meanwhile is left alone (the API wins).
- A batched status update applies only when it is newer than what the row holds
  (``last_check_at``), so a late batch never undoes a transition written directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg
import orjson

from engine.db.base import CHANNEL_CHECKS, UNAVAILABLE_ERRORS, StoreBase
from engine.db.certificates import record_certificate
from engine.db.notifications import queue_notifications
from engine.db.pool import is_closed, mark_session_state
from engine.db.webhook_queue import insert_event
from engine.domain import payloads
from engine.domain.evaluate import CheckState, Transition
from engine.kinds.scheduled import ScheduledCheck, Touch
from engine.runtime.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

# -- schedulable checks ------------------------------------------------------------------

_CHECK_COLUMNS = """
    c.id, c.monitor_id, c.kind, c.interval_s, c.notification_threshold_s, c.config_version,
    c.status, c.error, c.last_check_at, c.failing_since, c.detected_by, c.outage_id,
    c.incident_event_id, c.renewal_notified_for, o.verified_via,
    c.recovery_threshold_s, c.recovering_since, c.expiry_threshold_percent,
    c.renewal_notified_fingerprint, m.account_id,
    m.url, m.host, m.port, m.request, m.assertions
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

SQL_PING = "SELECT 1"

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
    renewal_notified_for = $10, recovering_since = $11, renewal_notified_fingerprint = $12,
    state_version = state_version + 1, updated_at = now()
WHERE id = $1
"""

# -- result batches --------------------------------------------------------------------------

RESULT_COLUMNS = (
    "check_id", "at", "kind", "outcome", "status_code", "total_ms", "dns_ms", "connect_ms",
    "tls_ms", "ttfb_ms", "region", "confirmation", "error",
)
# A results batch goes through one TEMP staging table on a connection the results writer
# holds (see ResultsSession): the batch is COPYed once, and probe_results, the hourly rollups
# and the "touches" are derived from it in SQL, so the engine does no per-row aggregation and
# no per-value array encoding.
#
# A staged line is a result row (kind not NULL), a touch (version not NULL), or both: a
# probe's touch rides on its own result row (same check, same time), so that the common
# probe (a row and a touch) costs one line, with its check id and time encoded once. A touch
# whose row is not in the batch (dropped in an outage, or written by an earlier batch) gets a
# line of its own, with NULL result columns.
#
# A batch is one transaction in four round trips: BEGIN, the COPY (two: asyncpg waits for
# the server's go-ahead before it streams), and one multi-statement query that derives
# everything and commits; BEGIN, two COPYs, three statements and COMMIT took nine. ON COMMIT
# DELETE ROWS empties the table in place at each commit (a rolled-back batch leaves nothing
# behind either); a TRUNCATE per batch would give the table a new file and rewrite its
# pg_class row every time.
#
# total_ms is double precision here (real in probe_results) so the rollup sums add the
# probe's own figures, as the engine's aggregation did, not their rounded copies.
# Times are staged as the interval since the Unix epoch (since_epoch), not timestamptz:
# asyncpg's timestamptz encoder (infinity comparisons, astimezone, a timedelta) costs about
# 1 us a value, its interval encoder reads a timedelta's three fields in C, and the
# timedelta is one datetime subtraction (~0.1 us; whole microseconds by floor division
# would be ~0.4 us more). SQL_AT turns them back, exactly and whatever the session's time
# zone: timestamp (without time zone) arithmetic adds the interval's days and microseconds
# as integers, and AT TIME ZONE 'UTC' makes that wall time a timestamptz unchanged.
# meta is staged as text: the writer encodes each distinct meta object once (many touches
# share the runner's per-status-code dicts); state_error is the touch's error (the check's),
# error the result row's.
SQL_CREATE_RESULTS_STAGING = """
CREATE TEMP TABLE IF NOT EXISTS results_staging (
    check_id bigint, since_epoch interval, kind smallint, outcome smallint,
    status_code smallint, total_ms double precision, dns_ms real, connect_ms real,
    tls_ms real, ttfb_ms real, region text, confirmation boolean, error text,
    version bigint, status text, state_error text, meta text
) ON COMMIT DELETE ROWS
"""
# Left on a connection handed back to the pool: it must come back as it was lent.
SQL_DROP_STAGING = "DROP TABLE IF EXISTS pg_temp.results_staging"
RESULTS_STAGING = "results_staging"
SQL_AT = "((timestamp '1970-01-01' + {t}.since_epoch) AT TIME ZONE 'UTC')"
SQL_RESULTS_FROM_STAGING = f"""
INSERT INTO probe_results ({", ".join(RESULT_COLUMNS)})
SELECT s.check_id, {SQL_AT.format(t="s")}, s.kind, s.outcome, s.status_code, s.total_ms,
       s.dns_ms, s.connect_ms, s.tls_ms, s.ttfb_ms, s.region, s.confirmation, s.error
FROM results_staging s
WHERE s.kind IS NOT NULL
"""
# Uptime probes only; confirmation probes re-measure a failure already counted, and
# checks_run_30d counts scheduled runs. Rows of checks deleted meanwhile are skipped by the
# join (the foreign key would refuse them). Sorted, so that writers lock rows in one order.
SQL_ROLLUPS_FROM_STAGING = f"""
INSERT INTO check_rollups_hourly AS r
    (check_id, hour, probes, responses, failures, response_ms_sum, response_ms_max)
SELECT s.check_id, date_trunc('hour', {SQL_AT.format(t="s")}, 'UTC'), count(*),
       count(s.status_code), count(*) FILTER (WHERE s.outcome = 2),
       coalesce(sum(coalesce(s.total_ms, 0)) FILTER (WHERE s.status_code IS NOT NULL), 0),
       GREATEST(0, max(coalesce(s.total_ms, 0)) FILTER (WHERE s.status_code IS NOT NULL))::real
FROM results_staging s
JOIN checks c ON c.id = s.check_id
WHERE s.kind = 1 AND NOT s.confirmation
GROUP BY 1, 2
ORDER BY 1, 2
ON CONFLICT (check_id, hour) DO UPDATE SET
    probes = r.probes + EXCLUDED.probes,
    responses = r.responses + EXCLUDED.responses,
    failures = r.failures + EXCLUDED.failures,
    response_ms_sum = r.response_ms_sum + EXCLUDED.response_ms_sum,
    response_ms_max = GREATEST(r.response_ms_max, EXCLUDED.response_ms_max)
"""
# Probes that changed nothing but status/error/meta/last_check_at, many checks per statement
# (the writer coalesces them: one per check, so one staged line per check). By check id, so
# that writers lock checks rows in one order.
SQL_TOUCHES_FROM_STAGING = f"""
UPDATE checks AS c SET
    status = u.status, error = u.state_error, meta = u.meta::jsonb, last_check_at = u.at,
    state_version = c.state_version + 1, updated_at = now()
FROM (SELECT s.check_id, s.version, {SQL_AT.format(t="s")} AS at, s.status, s.state_error,
             s.meta
      FROM results_staging s
      WHERE s.version IS NOT NULL
      ORDER BY s.check_id) AS u
WHERE c.id = u.check_id AND c.config_version = u.version
  AND (c.last_check_at IS NULL OR c.last_check_at < u.at)
"""


def _finish_sql(rows: bool, touches: bool) -> str:
    """The one query that derives a staged batch and commits it (see above). Should one of
    its statements fail, the server skips the rest, COMMIT included: the transaction is
    left aborted, for the writer to roll back."""
    parts = [SQL_RESULTS_FROM_STAGING, SQL_ROLLUPS_FROM_STAGING] if rows else []
    if touches:
        parts.append(SQL_TOUCHES_FROM_STAGING)
    parts.append("COMMIT")
    return ";".join(parts)


# By (rows?, touches?) of the batch.
SQL_FINISH = {(r, t): _finish_sql(r, t) for r in (False, True) for t in (False, True)}

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


class Listener:
    """A held LISTEN connection: ``lost`` is set once it is closed or stops answering."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self.lost = asyncio.Event()
        self._on_term = lambda _c: self.lost.set()
        conn.add_termination_listener(self._on_term)

    async def alive(self, timeout: float = 5.0) -> bool:
        """Round trip on the connection; False (and ``lost`` set) when it does not answer.

        A dead peer without a TCP reset is only noticed this way."""
        if self.lost.is_set() or is_closed(self._conn):
            self.lost.set()
            return False
        try:
            await self._conn.fetchval(SQL_PING, timeout=timeout)
            return True
        except (*UNAVAILABLE_ERRORS, asyncpg.PostgresError, TimeoutError):
            self.lost.set()
            return False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.remove_termination_listener(self._on_term)


@contextlib.asynccontextmanager
async def listening(
    acquired: contextlib.AbstractAsyncContextManager[Any], channel: str, callback: Any
) -> AsyncIterator[Listener]:
    """LISTEN on ``channel`` on the connection ``acquired`` gives, for the block."""
    async with acquired as conn:
        listener = Listener(conn)
        await conn.add_listener(channel, callback)
        try:
            yield listener
        finally:
            listener.close()
            if not is_closed(conn):
                with contextlib.suppress(*UNAVAILABLE_ERRORS, asyncpg.PostgresError):
                    await conn.remove_listener(channel, callback)


_BUILDERS: dict[str, Callable[..., bytes]] = {
    payloads.DOWNTIME: payloads.downtime,
    payloads.UPTIME_RESTORED: payloads.uptime_restored,
    payloads.CERTIFICATE_INVALID: payloads.certificate_invalid,
    payloads.CERTIFICATE_RECOVERED: payloads.certificate_recovered,
    payloads.CERTIFICATE_RENEWAL_DUE: payloads.certificate_renewal_due,
}


# The database gone, or a statement timed out (its connection is then in an unknown state).
_LOST: tuple[type[BaseException], ...] = (*UNAVAILABLE_ERRORS, TimeoutError)


class ResultsSession:
    """The results writer's own connection, held from the pool across batches because it
    keeps the TEMP staging table (session state: marked as such, per engine.db.pool's rule,
    and the table dropped before it goes back, since the pool's reset does not drop it).

    A connection lost with the database is dropped; the next write takes another one and
    re-creates the table, so reconnection needs nothing from the caller.
    """

    __slots__ = ("_conn", "_pool")

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._conn: Any = None

    async def _connection(self) -> Any:
        conn = self._conn
        if conn is not None:
            try:
                if not conn.is_closed():
                    return conn
            except asyncpg.InterfaceError:
                # Terminated already, which handed it back to the pool: the proxy is
                # detached and there is nothing left to close.
                self._conn = None
            else:
                self._drop()
        conn = await self._pool.acquire()
        try:
            mark_session_state(conn)
            await conn.execute(SQL_CREATE_RESULTS_STAGING)
        except BaseException:
            # Held only once its table exists; a half-set-up connection is not kept.
            with contextlib.suppress(Exception):
                conn.terminate()
            raise
        self._conn = conn
        return conn

    def _drop(self) -> None:
        """Forget the held connection, closing it: its state (an interrupted COPY, a broken
        socket) is unknown. Closing it hands its pool slot back."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.terminate()

    async def write(self, rows: Sequence[tuple[Any, ...]], touches: Mapping[int, Touch]) -> None:
        """All or nothing: ``rows`` (columns :data:`RESULT_COLUMNS`, aware datetimes) into
        probe_results, their hourly rollups into check_rollups_hourly, ``touches`` onto their
        checks rows. Neither argument is changed. Losing the database raises
        DatabaseUnavailable; a refusal raises the server's error, with nothing written."""
        if not rows and not touches:
            return
        # Before the connection is touched: a value that cannot be encoded raises here.
        lines = _staging_lines(rows, touches)
        try:
            conn = await self._connection()
            await conn.execute("BEGIN")
            await conn.copy_records_to_table(RESULTS_STAGING, records=lines)
            await conn.execute(SQL_FINISH[bool(rows), bool(touches)])
        except _LOST as exc:
            # Before PostgresError: a lost connection (PostgresConnectionError) is one too.
            self._drop()
            if isinstance(exc, TimeoutError):
                raise
            raise DatabaseUnavailable(str(exc) or type(exc).__name__) from exc
        except asyncpg.PostgresError:
            # Refused by the server: the transaction is aborted, the connection fine.
            await self._rollback()
            raise
        except BaseException:
            # Cancelled mid-statement, or asyncpg's own state error on a connection that died
            # under a COPY: the connection cannot be trusted any more.
            self._drop()
            raise

    async def _rollback(self) -> None:
        """End a refused batch's transaction (its staged lines go with it); drop the
        connection if that fails."""
        conn = self._conn
        if conn is None:
            return  # refused while it was being set up: it was not kept
        try:
            await conn.execute("ROLLBACK")
        except asyncio.CancelledError:
            self._drop()
            raise
        except Exception:
            self._drop()  # the refusal is what the caller hears about

    async def close(self) -> None:
        """Drop the staging table and give the connection back to the pool."""
        conn = self._conn
        if conn is None:
            return
        try:
            await conn.execute(SQL_DROP_STAGING)
            self._conn = None
            await self._pool.release(conn)
        except BaseException as exc:
            self._drop()
            if not isinstance(exc, (*UNAVAILABLE_ERRORS, asyncpg.PostgresError, TimeoutError)):
                raise


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The result columns of a line that carries only a touch (kind NULL: no probe_results row).
_NO_RESULT = (None,) * 11


def _staging_lines(
    rows: Sequence[tuple[Any, ...]], touches: Mapping[int, Touch]
) -> list[tuple[Any, ...]]:
    """Lines of results_staging (see SQL_CREATE_RESULTS_STAGING): every row, in order, with
    ``at`` as since_epoch and the touch of its check attached when the touch is the row's own
    (same time); then a line for each touch left over.

    The usual probe makes a row and a touch with the same datetime object, which ``is``
    finds at the cost of a dict lookup; any row of the check with an equal time would do
    (the touch's line would be the same), so identity is a shortcut, not a rule. Many
    touches share one meta object (the runner's per-status-code dicts): each is encoded
    once. The loop is written out (names, not slices or helpers): it runs for every row."""
    epoch = _EPOCH
    pending = dict(touches)
    pending_get = pending.get
    metas: dict[int, str] = {}
    lines: list[tuple[Any, ...]] = []
    add = lines.append
    for (c, at, kind, outcome, code, total, dns, connect, tls, ttfb, region, confirmation,
         error) in rows:
        t = pending_get(c)
        if t is None or t.at is not at:
            add((c, at - epoch, kind, outcome, code, total, dns, connect, tls, ttfb,
                 region, confirmation, error, None, None, None, None))
            continue
        del pending[c]
        meta = metas.get(id(t.meta))
        if meta is None:
            meta = metas[id(t.meta)] = orjson.dumps(t.meta).decode()
        add((c, at - epoch, kind, outcome, code, total, dns, connect, tls, ttfb,
             region, confirmation, error, t.config_version, t.status, t.error, meta))
    for c, t in pending.items():
        meta = metas.get(id(t.meta))
        if meta is None:
            meta = metas[id(t.meta)] = orjson.dumps(t.meta).decode()
        add((c, t.at - epoch, *_NO_RESULT, t.config_version, t.status, t.error, meta))
    return lines


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
                state.renewal_notified_fingerprint,
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
