"""Cluster nodes: register, heartbeat, the live view, hand-over on stop.

Liveness is judged by the database clock (``now()``), so nodes' clocks may differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from engine.db.base import CHANNEL_NODES, StoreBase

SQL_REGISTER_NODE = """
INSERT INTO nodes (id, region, url, version, started_at, heartbeat_at, stopping)
VALUES ($1, $2, $3, $4, now(), now(), false)
ON CONFLICT (id) DO UPDATE
   SET region = EXCLUDED.region, url = EXCLUDED.url, version = EXCLUDED.version,
       heartbeat_at = now(), stopping = false
"""
SQL_HEARTBEAT = """
UPDATE nodes SET heartbeat_at = now(), load = $2 WHERE id = $1 AND NOT stopping
"""
_NODE_COLUMNS = """id, region, url, version, started_at, heartbeat_at, stopping, load,
       (NOT stopping AND heartbeat_at > now() - make_interval(secs => $1)) AS live"""
SQL_LIVE_NODES = f"""
SELECT {_NODE_COLUMNS} FROM nodes
WHERE NOT stopping AND heartbeat_at > now() - make_interval(secs => $1)
ORDER BY id
"""
SQL_ALL_NODES = f"SELECT {_NODE_COLUMNS} FROM nodes ORDER BY region, id"
SQL_MARK_STOPPING = "UPDATE nodes SET stopping = true WHERE id = $1"
SQL_PRUNE_NODES = "DELETE FROM nodes WHERE heartbeat_at < now() - make_interval(secs => $1)"
SQL_ENABLED_CHECK_IDS = "SELECT id FROM checks WHERE is_enabled ORDER BY id"
SQL_PROBE_DEMAND = """
SELECT coalesce(sum(1.0 / interval_s), 0)::float8 FROM checks WHERE is_enabled AND interval_s > 0
"""
SQL_LIVE_CAPACITY = """
SELECT sum((load->>'capacity_per_s')::float8) FROM nodes
WHERE NOT stopping AND heartbeat_at > now() - make_interval(secs => $1) AND load IS NOT NULL
"""
SQL_CONFIRM_TARGET = """
SELECT m.url FROM checks c JOIN monitors m ON m.id = c.monitor_id
WHERE c.id = $1 AND c.kind = 'uptime'
"""
SQL_CONFIRM_CONFIG = """
SELECT m.request, m.assertions FROM checks c JOIN monitors m ON m.id = c.monitor_id
WHERE c.id = $1 AND c.kind = 'uptime'
"""


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    region: str
    url: str
    version: str
    started_at: datetime
    heartbeat_at: datetime
    stopping: bool
    live: bool
    # Its load as of its last heartbeat (NodeLoad.as_json()); None: no engine runs there.
    load: dict[str, Any] | None = field(default=None, compare=False)

    @classmethod
    def from_row(cls, r: asyncpg.Record) -> Node:
        return cls(
            id=r["id"],
            region=r["region"],
            url=r["url"],
            version=r["version"],
            started_at=r["started_at"],
            heartbeat_at=r["heartbeat_at"],
            stopping=r["stopping"],
            live=r["live"],
            load=r["load"],
        )


class ClusterMixin(StoreBase):
    async def register_node(self, node_id: str, region: str, url: str, version: str) -> None:
        async with self._tx() as conn:
            await conn.execute(SQL_REGISTER_NODE, node_id, region, url, version)
            await self._notify(conn, CHANNEL_NODES, node_id)

    async def heartbeat(self, node_id: str, load: dict[str, Any] | None = None) -> bool:
        """Record a heartbeat with the node's ``load`` (None: no engine); False when the row
        is gone or marked stopping."""
        status = await self._execute(SQL_HEARTBEAT, node_id, load)
        return status.endswith(" 1")

    async def live_nodes(self, dead_after_s: float) -> list[Node]:
        """Nodes that heartbeat within ``dead_after_s`` and are not stopping."""
        return [Node.from_row(r) for r in await self._fetch(SQL_LIVE_NODES, dead_after_s)]

    async def all_nodes(self, dead_after_s: float) -> list[Node]:
        return [Node.from_row(r) for r in await self._fetch(SQL_ALL_NODES, dead_after_s)]

    async def mark_node_stopping(self, node_id: str) -> None:
        """Hand this node's checks over at once: peers see it leave through NOTIFY."""
        async with self._tx() as conn:
            await conn.execute(SQL_MARK_STOPPING, node_id)
            await self._notify(conn, CHANNEL_NODES, node_id)

    async def prune_nodes(self, older_than_s: float) -> int:
        status = await self._execute(SQL_PRUNE_NODES, older_than_s)
        return int(status.split()[-1])

    async def probe_demand(self) -> float:
        """Probes per second every enabled check asks for (sum of 1/interval, unscaled)."""
        value: float = await self._fetchval(SQL_PROBE_DEMAND)
        return value

    async def live_capacity(self, dead_after_s: float) -> float | None:
        """The live nodes' measured capacity in probes/s, summed (None: none measured)."""
        value: float | None = await self._fetchval(SQL_LIVE_CAPACITY, dead_after_s)
        return value

    async def enabled_check_ids(self) -> list[int]:
        return [r["id"] for r in await self._fetch(SQL_ENABLED_CHECK_IDS)]

    async def confirm_target(self, check_id: int) -> str | None:
        """The URL a peer re-probes for an uptime check (None when it no longer exists)."""
        url: str | None = await self._fetchval(SQL_CONFIRM_TARGET, check_id)
        return url

    async def confirm_config(self, check_id: int) -> tuple[Any, Any] | None:
        """The stored ``(request, assertions)`` of the check's monitor; None when
        it sets neither or no longer exists."""
        row = await self._fetchrow(SQL_CONFIRM_CONFIG, check_id)
        if row is None or (row["request"] is None and row["assertions"] is None):
            return None
        return row["request"], row["assertions"]
