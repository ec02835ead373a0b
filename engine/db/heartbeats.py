"""Heartbeats: their configuration, the account's ping key, and pings written in batches.

A heartbeat monitor is a ``monitors`` row (scheme ``heartbeat``, no URL) with one check of
kind ``heartbeat`` and its ``heartbeats`` row (configuration and the facts its pings left,
engine/domain/heartbeat.py). :meth:`HeartbeatsMixin.record_pings` writes a whole batch of
pings in one transaction: the heartbeats' rows locked, each ping folded into its facts in
order, one UPDATE of the facts, one INSERT of the pings, and for the checks whose verdict a
ping may change (a failure, a start, a success of a check not up) a ``config_version``
bump and one ``NOTIFY upwatch_checks`` per check, so the owning node judges it at once (the
resync finds a lost notification). A plain success of a check that is up notifies nobody:
the owner reads the facts when the deadline it holds comes.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson

from engine.db.base import CHANNEL_CHECKS, StoreBase
from engine.db.monitor_records import CheckRecord, MonitorRecord
from engine.domain import heartbeat as hb
from engine.domain.heartbeat import Beat, beat_of_row
from engine.monitors.checkset import HEARTBEAT, checks_of
from engine.monitors.heartbeat_file import HeartbeatEntry
from engine.runtime.errors import LimitReached, NotFound

PING_KEY_BYTES = 16
IDENTIFIER_BYTES = 9
KEEP_PINGS = 1000  # pings kept per heartbeat, newest first (as Healthchecks keeps 100)
BODY_EXCERPT = 1000  # characters of the last ping's body shown in the check's meta

_HB_COLUMNS = """
    h.check_id, h.account_id, h.ping_uuid::text AS ping_uuid, h.slug, h.period_s, h.schedule,
    h.time_zone, h.grace_s, h.max_runtime_s, h.min_runtime_s, h.min_interval_s,
    h.last_ping_at, h.last_success_at, h.last_failure_at, h.failure_reason, h.last_start_at,
    h.last_duration_s, h.last_exit_status, h.runs, h.last_body
"""

SQL_LOCK_ACCOUNT = "SELECT id FROM accounts WHERE id = $1 FOR NO KEY UPDATE"
SQL_COUNT_MONITORS = "SELECT count(*) FROM monitors WHERE account_id = $1"
SQL_INSERT_MONITOR = """
INSERT INTO monitors AS m (account_id, identifier, alias, url, scheme, host, port, key)
VALUES ($1, $2, $3, '', 'heartbeat', '', '', $4)
ON CONFLICT (identifier) DO NOTHING
RETURNING m.id, m.identifier, m.alias, m.url, m.scheme, m.host, m.port, m.request,
          m.assertions
"""
SQL_INSERT_CHECK = """
INSERT INTO checks AS c (monitor_id, kind, interval_s, notification_threshold_s, is_enabled,
                         status, recovery_threshold_s)
VALUES ($1, 'heartbeat', $2, 0, true, 'pending', $3)
RETURNING c.id, c.monitor_id, c.kind, c.status, c.error, c.interval_s, c.is_enabled,
          c.notification_threshold_s, c.last_check_at, c.meta, c.recovery_threshold_s,
          c.expiry_threshold_percent
"""
SQL_INSERT_HEARTBEAT = f"""
INSERT INTO heartbeats AS h (check_id, account_id, ping_uuid, slug, period_s, schedule,
                             time_zone, grace_s, max_runtime_s, min_runtime_s, min_interval_s)
VALUES ($1, $2, $3::uuid, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING {_HB_COLUMNS}
"""
SQL_OPEN_PERIOD = """
INSERT INTO check_periods (check_id, started_at) VALUES ($1, clock_timestamp())
ON CONFLICT DO NOTHING
"""
SQL_HEARTBEATS_OF_CHECKS = f"""
SELECT {_HB_COLUMNS} FROM heartbeats h WHERE h.check_id = ANY($1::bigint[])
"""
SQL_HEARTBEAT_OF_ACCOUNT = f"""
SELECT {_HB_COLUMNS} FROM heartbeats h WHERE h.check_id = $1 AND h.account_id = $2
FOR UPDATE
"""
SQL_UPDATE_HEARTBEAT = """
UPDATE heartbeats SET period_s = $2, schedule = $3, time_zone = $4, grace_s = $5,
    max_runtime_s = $6, min_runtime_s = $7, min_interval_s = $8
WHERE check_id = $1
"""
SQL_BUMP_CHECKS = """
UPDATE checks SET config_version = config_version + 1, interval_s = COALESCE($2, interval_s),
    updated_at = now()
WHERE id = ANY($1::bigint[])
"""
SQL_NOTIFY_CHECKS = "SELECT pg_notify($1, t.id::text) FROM unnest($2::bigint[]) AS t(id)"

SQL_HEARTBEAT_SET = f"""
SELECT {_HB_COLUMNS}, COALESCE(m.key, m.identifier) AS key, m.id AS monitor_id, m.alias,
       m.assertions, c.is_enabled, c.recovery_threshold_s
FROM heartbeats h JOIN checks c ON c.id = h.check_id JOIN monitors m ON m.id = c.monitor_id
WHERE h.account_id = $1
ORDER BY m.id
"""

SQL_PING_KEY = """
UPDATE accounts SET ping_key = COALESCE(ping_key, $2) WHERE id = $1 RETURNING ping_key
"""
SQL_SLUG_TARGET = """
SELECT a.id AS account_id, h.ping_uuid::text AS ping_uuid
FROM accounts a LEFT JOIN heartbeats h ON h.account_id = a.id AND h.slug = $2
WHERE a.ping_key = $1
"""

# The targets of a batch, locked in check order (two batches never deadlock).
SQL_LOCK_TARGETS = f"""
SELECT {_HB_COLUMNS}, c.status, c.is_enabled, m.assertions
FROM heartbeats h JOIN checks c ON c.id = h.check_id JOIN monitors m ON m.id = c.monitor_id
WHERE h.ping_uuid = ANY($1::uuid[])
ORDER BY h.check_id
FOR UPDATE OF h
"""
SQL_WRITE_FACTS = """
UPDATE heartbeats h SET
    last_ping_at = u.last_ping_at, last_success_at = u.last_success_at,
    last_failure_at = u.last_failure_at, failure_reason = u.failure_reason,
    last_start_at = u.last_start_at, last_duration_s = u.last_duration_s,
    last_exit_status = u.last_exit_status, runs = u.runs::jsonb, last_body = u.last_body
FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[], $5::text[],
            $6::timestamptz[], $7::float8[], $8::smallint[], $9::text[], $10::text[])
     AS u(check_id, last_ping_at, last_success_at, last_failure_at, failure_reason,
          last_start_at, last_duration_s, last_exit_status, runs, last_body)
WHERE h.check_id = u.check_id
"""
SQL_INSERT_PINGS = """
INSERT INTO heartbeat_pings (check_id, at, kind, exit_status, rid, method, remote_addr, body,
                             body_cut, failure)
SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::smallint[], $5::text[],
                     $6::text[], $7::text[], $8::text[], $9::bool[], $10::text[])
"""
# Pings of checks $1 older than their newest $2 (the index on (check_id, id DESC) finds
# each check's bound in one probe).
SQL_TRIM_PINGS = """
DELETE FROM heartbeat_pings p
USING (
    SELECT t.id AS check_id,
           (SELECT id FROM heartbeat_pings WHERE check_id = t.id
            ORDER BY id DESC OFFSET $2 LIMIT 1) AS bound
    FROM unnest($1::bigint[]) AS t(id)
) b
WHERE p.check_id = b.check_id AND p.id <= b.bound
"""
SQL_RECENT_PINGS = """
SELECT p.at, p.kind, p.exit_status, p.rid, p.method, p.body, p.body_cut, p.failure
FROM heartbeat_pings p JOIN heartbeats h ON h.check_id = p.check_id
WHERE p.check_id = $1 AND h.account_id = $2
ORDER BY p.id DESC LIMIT $3
"""


@dataclass(frozen=True, slots=True)
class HeartbeatRecord:
    """A heartbeat's configuration and facts, as stored."""

    check_id: int
    account_id: int
    ping_uuid: str
    slug: str | None
    config: hb.Config
    facts: hb.Facts
    last_body: str | None

    @classmethod
    def from_row(cls, r: Any) -> HeartbeatRecord:
        beat = beat_of_row(r)
        return cls(
            check_id=r["check_id"], account_id=r["account_id"], ping_uuid=r["ping_uuid"],
            slug=r["slug"], config=beat.config, facts=beat.facts, last_body=beat.body,
        )


def config_of(r: Any) -> hb.Config:
    return beat_of_row(r).config


@dataclass(frozen=True, slots=True)
class IncomingPing:
    """One ping as the ping endpoint received it. ``ping``'s ``assertion_error`` is judged
    by the store's caller when the heartbeat has assertions (``judge_body``)."""

    ping_uuid: str
    ping: hb.Ping
    method: str
    remote_addr: str | None
    body: str | None
    body_cut: bool


def _changes_verdict(status: str, ping: hb.Ping, reason: str | None) -> bool:
    if ping.kind == hb.LOG:
        return False
    return reason is not None or ping.kind != hb.SUCCESS or status != "ok"


class HeartbeatsMixin(StoreBase):
    """Heartbeat monitors, ping keys and ping batches (see the module docstring)."""

    async def create_heartbeat(
        self,
        account_id: int,
        *,
        alias: str,
        config: hb.Config,
        monitor_limit: int,
        recovery_threshold: int = 0,
        ping_uuid: str | None = None,
        slug: str | None = None,
        key: str | None = None,
    ) -> tuple[MonitorRecord, HeartbeatRecord]:
        """Create a heartbeat monitor: its pending check and its heartbeats row. ``ping_uuid``:
        keep a given id (an importer's), else a new UUID4. Raises LimitReached at the
        account's monitor limit, NotFound when the account is gone, and
        ``asyncpg.UniqueViolationError`` for a uuid or slug already taken."""
        ping_id = str(uuid.UUID(ping_uuid)) if ping_uuid else str(uuid.uuid4())
        assert checks_of("", "", HEARTBEAT) == (HEARTBEAT,)  # the one check inserted below
        async with self._tx() as conn:
            if await conn.fetchval(SQL_LOCK_ACCOUNT, account_id) is None:
                raise NotFound("Account not found.")
            if await conn.fetchval(SQL_COUNT_MONITORS, account_id) >= monitor_limit:
                raise LimitReached(
                    f"The account has reached its limit of {monitor_limit} monitors.")
            monitor = None
            for _ in range(5):
                monitor = await conn.fetchrow(
                    SQL_INSERT_MONITOR, account_id, secrets.token_urlsafe(IDENTIFIER_BYTES),
                    alias, key)
                if monitor is not None:
                    break
            if monitor is None:
                raise RuntimeError("could not allocate a unique monitor identifier")
            check_row = await conn.fetchrow(
                SQL_INSERT_CHECK, monitor["id"], config.period_s or 86400, recovery_threshold)
            row = await conn.fetchrow(
                SQL_INSERT_HEARTBEAT, check_row["id"], account_id, ping_id, slug,
                config.period_s, config.schedule, config.time_zone, config.grace_s,
                config.max_runtime_s, config.min_runtime_s, config.min_interval_s)
            await conn.execute(SQL_OPEN_PERIOD, check_row["id"])
            await self._notify(conn, CHANNEL_CHECKS, str(check_row["id"]))
        check = CheckRecord.from_row(check_row)
        return MonitorRecord.from_rows(monitor, [check]), HeartbeatRecord.from_row(row)

    async def heartbeats_of(self, check_ids: Iterable[int]) -> dict[int, HeartbeatRecord]:
        """The heartbeat rows of these checks, by check id (other kinds have none)."""
        ids = list(check_ids)
        if not ids:
            return {}
        rows = await self._fetch(SQL_HEARTBEATS_OF_CHECKS, ids)
        return {r["check_id"]: HeartbeatRecord.from_row(r) for r in rows}

    async def update_heartbeat(
        self, account_id: int, check_id: int, changes: dict[str, Any]
    ) -> HeartbeatRecord:
        """Change a heartbeat's schedule fields (keys of :class:`hb.Config`; a ``period_s``
        clears ``schedule`` and the other way round), bump and notify its check."""
        async with self._tx() as conn:
            row = await conn.fetchrow(SQL_HEARTBEAT_OF_ACCOUNT, check_id, account_id)
            if row is None:
                raise NotFound("Check not found.")
            c = config_of(row)
            fields: dict[str, Any] = {
                "period_s": c.period_s, "schedule": c.schedule, "time_zone": c.time_zone,
                "grace_s": c.grace_s, "max_runtime_s": c.max_runtime_s,
                "min_runtime_s": c.min_runtime_s, "min_interval_s": c.min_interval_s,
            }
            if changes.get("period_s") is not None:
                fields["schedule"] = None
            if changes.get("schedule") is not None:
                fields["period_s"] = None
            fields.update(changes)
            new = hb.Config(**fields)
            await conn.execute(
                SQL_UPDATE_HEARTBEAT, check_id, new.period_s, new.schedule, new.time_zone,
                new.grace_s, new.max_runtime_s, new.min_runtime_s, new.min_interval_s)
            await conn.execute(SQL_BUMP_CHECKS, [check_id], new.period_s or 86400)
            await self._notify(conn, CHANNEL_CHECKS, str(check_id))
            row = await conn.fetchrow(SQL_HEARTBEAT_OF_ACCOUNT, check_id, account_id)
        return HeartbeatRecord.from_row(row)

    async def heartbeat_set(self, account_id: int) -> list[HeartbeatEntry]:
        """The account's heartbeats as monitors as code sees them, in id order; one without
        a key of its own is named by its identifier."""
        rows = await self._fetch(SQL_HEARTBEAT_SET, account_id)
        out = []
        for r in rows:
            beat = beat_of_row(r)
            out.append(HeartbeatEntry(
                key=r["key"], alias=r["alias"], config=beat.config,
                recovery_threshold=r["recovery_threshold_s"], slug=r["slug"],
                ping_uuid=r["ping_uuid"], assertions=r["assertions"] or None,
                enabled=r["is_enabled"], monitor_id=r["monitor_id"], check_id=r["check_id"]))
        return out

    async def ping_key(self, account_id: int) -> str:
        """The account's ping key for slug pings, made on first use."""
        key = await self._fetchval(SQL_PING_KEY, account_id, secrets.token_urlsafe(PING_KEY_BYTES))
        if key is None:
            raise NotFound("Account not found.")
        return str(key)

    async def slug_target(self, ping_key: str, slug: str) -> tuple[int | None, str | None]:
        """(account id, ping uuid) of slug ``slug`` under ``ping_key``: (None, None) for an
        unknown key, (account, None) for a known key without that slug."""
        row = await self._fetchrow(SQL_SLUG_TARGET, ping_key, slug)
        if row is None:
            return None, None
        return row["account_id"], row["ping_uuid"]

    async def recent_pings(
        self, account_id: int, check_id: int, limit: int = 100
    ) -> list[asyncpg.Record]:
        return await self._fetch(SQL_RECENT_PINGS, check_id, account_id, limit)

    async def record_pings(
        self, pings: Sequence[IncomingPing], judge_body: Any = None, *,
        keep: int = KEEP_PINGS,
    ) -> list[bool]:
        """Write a batch of pings (see the module docstring); per ping, whether its id is a
        heartbeat (False: unknown, nothing written for it). ``judge_body(assertions, body)``
        gives a failed body assertion's words or None, for heartbeats with assertions.
        Each heartbeat keeps its newest ``keep`` pings."""
        ids = sorted({p.ping_uuid for p in pings})
        async with self._tx() as conn:
            rows = await conn.fetch(SQL_LOCK_TARGETS, ids)
            by_uuid = {r["ping_uuid"]: r for r in rows}
            facts = {u: beat_of_row(r).facts for u, r in by_uuid.items()}
            bodies: dict[str, str | None] = {u: r["last_body"] for u, r in by_uuid.items()}
            found: list[bool] = []
            out: list[tuple[Any, ...]] = []
            notify: set[int] = set()
            for p in pings:
                r = by_uuid.get(p.ping_uuid)
                found.append(r is not None)
                if r is None:
                    continue
                ping = p.ping
                if (judge_body is not None and r["assertions"] is not None
                        and ping.kind == hb.SUCCESS):
                    ping = hb.Ping(ping.kind, ping.at, ping.rid, ping.exit_status, ping.reason,
                                   judge_body(r["assertions"], p.body or ""))
                new, reason = hb.apply_ping(facts[p.ping_uuid], ping, config_of(r))
                facts[p.ping_uuid] = new
                if p.body:
                    bodies[p.ping_uuid] = p.body[:BODY_EXCERPT]
                if r["is_enabled"] and _changes_verdict(r["status"], ping, reason):
                    notify.add(r["check_id"])
                out.append((r["check_id"], ping, p, reason))
            if out:
                await conn.execute(SQL_INSERT_PINGS, *_columns([
                    (cid, ping.at, ping.kind, ping.exit_status, ping.rid or None, p.method,
                     p.remote_addr, p.body, p.body_cut, reason)
                    for cid, ping, p, reason in out], 10))
                written = [(by_uuid[u]["check_id"], f, bodies[u]) for u, f in facts.items()]
                await conn.execute(SQL_WRITE_FACTS, *_columns([
                    (cid, f.last_ping_at, f.last_success_at, f.last_failure_at,
                     f.failure_reason, f.last_start_at, f.last_duration_s, f.last_exit_status,
                     orjson.dumps({k: v.timestamp() for k, v in f.runs.items()}).decode(),
                     body)
                    for cid, f, body in written], 10))
                await conn.execute(SQL_TRIM_PINGS, sorted({o[0] for o in out}), keep)
            if notify:
                ordered = sorted(notify)
                await conn.execute(SQL_BUMP_CHECKS, ordered, None)
                await conn.execute(SQL_NOTIFY_CHECKS, CHANNEL_CHECKS, ordered)
        return found

    async def heartbeat_beat(self, check_id: int) -> Beat | None:
        """A heartbeat's current configuration and facts (the engine's read at a deadline)."""
        rows = await self._fetch(SQL_HEARTBEATS_OF_CHECKS, [check_id])
        return beat_of_row(rows[0]) if rows else None


def _columns(rows: list[tuple[Any, ...]], n: int) -> list[list[Any]]:
    """Rows -> n column lists (for unnest)."""
    cols: list[list[Any]] = [[] for _ in range(n)]
    for row in rows:
        for i, v in enumerate(row):
            cols[i].append(v)
    return cols

