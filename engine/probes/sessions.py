"""The uptime probe's kept TLS sessions: one per (address, port, SNI), bounded in number.

Contract: :meth:`TlsSessions.get` gives the session kept for a site, or None;
:meth:`TlsSessions.keep` keeps one (replacing the site's last) when there is room;
:meth:`TlsSessions.drop` forgets a site's. At most ``limit`` sessions are kept (0: none).

Sizing and order: the engine probes its sites in a cycle, each once per interval. A cache
that drops its oldest entry for each new one keeps none long enough to be used when the
sites outnumber it (docs/performance.md: 0 of ~15,000 handshakes resumed). So a full cache
keeps what it has and turns new sessions away, and sessions are dropped only when unused:
entries live in two generations, and every ``idle`` seconds the older generation (sessions
not offered or renewed for ``idle`` to ``2 * idle`` seconds: deleted monitors, servers gone)
is dropped whole. With
``limit`` below the number of HTTPS sites, ``limit`` of them resume; with ``limit`` above,
all of them.

Keys are the hash of (address, port, SNI), not the tuple: ~100 bytes less per site (the
tuple and its name string), and a collision (one in 10^10 at 50,000 sites) only offers a
session that the other server declines (a full handshake).
"""

from __future__ import annotations

import math
from typing import Any, Final

# Seconds a kept session may go unused before it is dropped (between one and two of these).
IDLE_S: Final = 3600.0


class TlsSessions:
    """Kept sessions (opaque objects: compact ``bytes`` of the pyOpenSSL layer, or the
    ``ssl`` module's ``SSLSession``), by ``key(address, port, sni)``."""

    __slots__ = ("_current", "_limit", "_next_turn", "_older", "idle")

    def __init__(self, limit: int, idle: float = IDLE_S) -> None:
        self._limit = max(0, limit)
        self.idle = idle
        self._current: dict[int, Any] = {}
        self._older: dict[int, Any] = {}
        self._next_turn = -math.inf

    @staticmethod
    def key(address: str, port: int, sni: str | None) -> int:
        return hash((address, port, sni))

    @property
    def limit(self) -> int:
        return self._limit

    def __len__(self) -> int:
        return len(self._current) + len(self._older)

    def get(self, key: int) -> Any:
        """The session kept for ``key``, or None."""
        session = self._current.get(key)
        if session is None:
            session = self._older.get(key)
        return session

    def keep(self, key: int, session: Any, now: float) -> None:
        """Keep ``session`` for ``key`` (``now``: a monotonic clock in seconds). Replaces the
        key's last one; a new key is turned away while the cache is full."""
        if now >= self._next_turn:
            # The older generation was unused for a whole turn: drop it.
            self._older = self._current
            self._current = {}
            self._next_turn = now + self.idle
        current = self._current
        if key in current:
            current[key] = session
            return
        older = self._older
        if key in older:
            del older[key]
        elif len(current) + len(older) >= self._limit:
            return
        current[key] = session

    def drop(self, key: int) -> None:
        self._current.pop(key, None)
        self._older.pop(key, None)

    def clear(self) -> None:
        self._current = {}
        self._older = {}
