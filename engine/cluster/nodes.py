"""This node's membership in the cluster: register, heartbeat, watch the others.

Each engine instance writes a heartbeat every ``heartbeat_interval`` and refreshes its view
of the live nodes twice as often (and at once when NOTIFY says a node joined or left). A node
is dead once it has not heartbeated for two intervals, so its checks move within about
2.5 intervals (under the three heartbeats the cluster promises). A node that stops
gracefully marks itself ``stopping`` first, and the others take its checks at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from typing import IO

import asyncpg

from engine import __version__
from engine.cluster.ownership import Ring
from engine.db.base import CHANNEL_NODES
from engine.db.cluster import Node
from engine.db.store import Store
from engine.runtime.errors import ConfigError, DatabaseUnavailable
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings

log = logging.getLogger(__name__)

DEAD_AFTER_HEARTBEATS = 2.0


def new_node_id(region: str) -> str:
    return f"{region}-{socket.gethostname()[:32]}-{secrets.token_hex(4)}"


def stable_node_id(data_dir: Path, region: str) -> tuple[str, IO[str] | None]:
    """This instance's node id, kept in ``data_dir/node-id`` so that a restart (after a crash
    too) is the same node: its not-yet-expired row is itself, not a stranger, and it gets
    the same checks back. A lock on ``data_dir/node.lock`` (held for the process's life, the
    returned file) makes a second process on the same data dir take a fresh id instead."""
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = open(data_dir / "node.lock", "a+", encoding="utf-8")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return new_node_id(region), None
    path = data_dir / "node-id"
    try:
        node_id = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        node_id = ""
    if not node_id.startswith(f"{region}-") or len(node_id) > 120:
        node_id = new_node_id(region)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(node_id + "\n", encoding="utf-8")
        tmp.replace(path)
    return node_id, lock


class Membership:
    """The live-node view and the ownership it implies. Safe to read at any time."""

    def __init__(self, node_id: str, region: str) -> None:
        self.node_id = node_id
        self.region = region
        self.nodes: tuple[Node, ...] = ()
        self.ring = Ring([node_id])
        self._listeners: list[Callable[[], None]] = []

    def owns(self, check_id: int) -> bool:
        return self.ring.owner(check_id) == self.node_id

    def peers(self) -> list[tuple[str, str]]:
        """(node_id, region) of live nodes other than this one."""
        return [(n.id, n.region) for n in self.nodes if n.id != self.node_id]

    def node(self, node_id: str) -> Node | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    def on_change(self, fn: Callable[[], None]) -> None:
        self._listeners.append(fn)

    def update(self, nodes: list[Node]) -> bool:
        """Install a new view; True (and listeners called) when the live set changed."""
        ids = {n.id for n in nodes} | {self.node_id}
        changed = set(self.ring.nodes) != ids
        self.nodes = tuple(nodes)
        if changed:
            self.ring = Ring(ids)
            for fn in self._listeners:
                fn()
        return changed


class NodeRegistry:
    """Component: keeps this node registered and its Membership current."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        metrics: Metrics,
        dsn: str,
        node_id: str | None = None,
    ) -> None:
        self.store, self.settings, self.metrics, self.dsn = store, settings, metrics, dsn
        self._lock: IO[str] | None = None
        if node_id is None:
            node_id, self._lock = stable_node_id(settings.data_dir, settings.region)
        self.membership = Membership(node_id, settings.region)
        self._wake = asyncio.Event()

    @property
    def dead_after(self) -> float:
        return DEAD_AFTER_HEARTBEATS * self.settings.heartbeat_interval

    async def register(self) -> None:
        """Join the cluster. Refuses to join others without a cluster secret."""
        others = [
            n for n in await self.store.live_nodes(self.dead_after)
            if n.id != self.membership.node_id
        ]
        if others and self.settings.cluster_secret is None:
            raise ConfigError(
                "UPWATCH_CLUSTER_SECRET is required: other instances "
                f"({', '.join(n.id for n in others[:3])}) share this database"
            )
        await self.store.register_node(
            self.membership.node_id, self.settings.region, self.settings.peer_url, __version__
        )
        self.metrics.node_info.labels(
            node=self.membership.node_id, region=self.settings.region, version=__version__
        ).set(1)
        await self.refresh()
        log.info("joined cluster", extra={"node": self.membership.node_id,
                                          "region": self.settings.region,
                                          "live_nodes": len(self.membership.nodes)})

    async def refresh(self) -> None:
        nodes = await self.store.live_nodes(self.dead_after)
        if self.membership.update(nodes):
            self.metrics.ownership_changes.inc()
            log.info("cluster membership changed",
                     extra={"live_nodes": ",".join(n.id for n in nodes)})
        self.metrics.live_nodes.set(len(nodes))

    async def run(self, stop: asyncio.Event) -> None:
        listener = await self._listen()
        hb = self.settings.heartbeat_interval
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + hb
        try:
            while not stop.is_set():
                try:
                    if loop.time() >= next_beat:
                        load = self.metrics.load
                        if not await self.store.heartbeat(
                                self.membership.node_id,
                                load.as_json() if load is not None else None):
                            await self.store.register_node(
                                self.membership.node_id, self.settings.region,
                                self.settings.peer_url, __version__)
                        self.metrics.heartbeats.inc()
                        next_beat = loop.time() + hb
                    await self.refresh()
                except DatabaseUnavailable as exc:
                    log.warning("heartbeat failed: %s", exc)
                    if listener is not None and listener.is_closed():
                        listener = None
                if listener is None:
                    listener = await self._listen()
                self._wake.clear()
                waits = [
                    asyncio.ensure_future(stop.wait()),
                    asyncio.ensure_future(self._wake.wait()),
                ]
                await asyncio.wait(waits, timeout=hb / 2, return_when=asyncio.FIRST_COMPLETED)
                for w in waits:
                    w.cancel()
        finally:
            with contextlib.suppress(DatabaseUnavailable):
                await self.store.mark_node_stopping(self.membership.node_id)
            if listener is not None:
                with contextlib.suppress(Exception):
                    await listener.close()

    async def _listen(self) -> asyncpg.Connection | None:
        """A dedicated connection LISTENing for joins and leaves (None while the DB is away)."""
        try:
            conn = await asyncpg.connect(self.dsn)
            await conn.add_listener(CHANNEL_NODES, lambda *_: self._wake.set())
            return conn
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("cannot listen for node changes: %s", exc)
            return None


async def node_table(store: Store, settings: Settings) -> list[dict[str, object]]:
    """Every known node with its liveness and how many enabled checks it owns now (by the
    same rendezvous function the engines use), for operators."""
    dead_after = DEAD_AFTER_HEARTBEATS * settings.heartbeat_interval
    nodes = await store.all_nodes(dead_after)
    ring = Ring([n.id for n in nodes if n.live])
    owned: dict[str, int] = {n.id: 0 for n in nodes}
    for check_id in await store.enabled_check_ids():
        owner = ring.owner(check_id)
        if owner is not None:
            owned[owner] = owned.get(owner, 0) + 1
    return [
        {
            "id": n.id,
            "region": n.region,
            "url": n.url,
            "version": n.version,
            "started_at": n.started_at,
            "last_heartbeat_at": n.heartbeat_at,
            "live": n.live,
            "stopping": n.stopping,
            "checks_owned": owned.get(n.id, 0) if n.live else 0,
            "load": n.load if n.live else None,
        }
        for n in nodes
    ]


async def capacity_check(store: Store, settings: Settings) -> str | None:
    """A warning when the enabled checks ask for more probes per second than the live nodes
    can hold (engine.scheduler.load.capacity_warning); None when within it or unknown."""
    from engine.scheduler.load import capacity_warning

    capacity = await store.live_capacity(DEAD_AFTER_HEARTBEATS * settings.heartbeat_interval)
    asked = await store.probe_demand() / settings.time_scale
    return capacity_warning(asked, capacity)
