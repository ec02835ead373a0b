"""Connection pool: orjson codecs for json/jsonb, UTC sessions."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(
            typ,
            encoder=lambda v: orjson.dumps(v).decode(),
            decoder=orjson.loads,
            schema="pg_catalog",
        )


async def create_pool(
    dsn: str, *, min_size: int = 2, max_size: int = 20, **kw: Any
) -> asyncpg.Pool:
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        server_settings={"timezone": "UTC", "application_name": "upwatch"},
        command_timeout=60,
        **kw,
    )
    assert pool is not None
    return pool
