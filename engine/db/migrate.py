"""Numbered ``.sql`` migrations, applied in order, each in its own transaction.

An advisory lock serialises concurrent starts: two instances migrating at once cannot race.
Applied versions are recorded in ``schema_migrations``.
"""

from __future__ import annotations

import logging
import re
from importlib import resources

import asyncpg

from engine.db.pool import mark_session_state

log = logging.getLogger(__name__)

_LOCK_KEY = 0x5570_7761_7463_68  # "Upwatch"
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def available() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every migration shipped with the package, in order."""
    out = []
    for entry in resources.files("engine.db.migrations").iterdir():
        m = _NAME.match(entry.name)
        if m:
            out.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    out.sort()
    versions = [v for v, _, _ in out]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions: {versions}")
    return out


async def apply(conn: asyncpg.Connection) -> list[str]:
    """Apply pending migrations on ``conn``; returns the file names applied."""
    applied_now: list[str] = []
    # A session lock: if the unlock below never runs, a pooled connection must not go back
    # to the pool still holding it.
    mark_session_state(conn)
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version integer PRIMARY KEY,
                   name text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, name, sql in available():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            log.info("applied migration %s", name)
            applied_now.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return applied_now
