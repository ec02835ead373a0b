"""The results path's writes: a batch of probe results and "last checked" touches goes
through one TEMP staging table (COPY) and one query that derives ``probe_results``, the
hourly rollups and the touched ``checks`` rows from it, then commits.

:class:`ResultsSession` holds the connection (and its staging table) across batches for the
results writer (:mod:`engine.scheduler.results`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
import orjson

from engine.db.base import UNAVAILABLE_ERRORS
from engine.db.pool import mark_session_state
from engine.kinds.scheduled import Touch
from engine.runtime.errors import DatabaseUnavailable, stray_cancel

log = logging.getLogger(__name__)

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
WHERE s.kind IN (1, 3) AND NOT s.confirmation  -- uptime probes, heartbeat judgments
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
        except BaseException as exc:
            # Cancelled mid-statement, or asyncpg's own state error on a connection that died
            # under a COPY: the connection cannot be trusted any more.
            self._drop()
            if stray_cancel(exc):
                raise DatabaseUnavailable("the connection was lost mid-write") from exc
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
            if stray_cancel(exc):
                return  # the connection is gone, which is all closing it was for
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
