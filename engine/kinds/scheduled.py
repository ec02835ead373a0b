"""What the engine holds per check: :class:`ScheduledCheck`, and the :class:`Touch` a steady
probe leaves for the results writer.

The store builds them (``engine/db/probing.py``) and the engine reads them on every probe:
compiled with the engine's other per-probe modules (engine/runtime/compiled.py), their fields are
read and written in C, and integer and float fields are kept unboxed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.domain.evaluate import CheckState
from engine.domain.heartbeat import beat_of_row


@dataclass(slots=True, eq=False)
class ScheduledCheck:
    """One enabled check as the engine holds it (kept small: there may be 100,000).

    Configuration is what the probe needs (``url``, ``host``, ``port``) plus the unscaled
    interval and threshold; ``state`` is the state machine's; ``due`` is the runner's (its
    clock), kept by its timing wheel while the check is in it (``TimingWheel.schedule``).
    Compared and hashed by identity (``eq=False``): the wheel holds the checks themselves.
    ``host`` is interned: a monitor's two checks and the resolver's cache entry share it.
    ``url`` is not (the engine gives a monitor's second check the first one's string).
    """

    id: int
    monitor_id: int
    kind: str
    url: str
    host: str
    port: int
    interval_s: int
    threshold_s: int
    config_version: int
    state: CheckState
    due: float = 0.0
    # The monitor's stored request and assertions (None: neither is set, the plain
    # GET), and the spec the engine builds from them when it adopts the check.
    configured: tuple[Any, Any] | None = None
    request: Any = None  # the spec its scheme's prober takes (RequestSpec for http(s))
    # Uptime: the recovery threshold (s, unscaled). Certificate: the expiry threshold in
    # percent of the certificate's lifetime.
    recovery_s: int = 0
    expiry_percent: int = 0
    account_id: int = 0  # its maintenance windows; its share of the costly assertions
    # Heartbeat: what the engine knows of it (engine.kinds.heartbeat.Beat); None otherwise.
    heartbeat: Any = None
    # Domain expiry: the days before expiry a renewal-due is sent at (None: the defaults;
    # empty: none).
    expiry_days: tuple[int, ...] | None = None

    @classmethod
    def from_row(cls, r: Mapping[str, Any]) -> ScheduledCheck:
        """From a row of the store's check query."""
        port_text = r["port"]
        req = r["request"]
        asserts = r["assertions"]
        try:
            port = int(port_text) if port_text else 0
        except ValueError:
            port = 0
        return cls(
            id=r["id"],
            monitor_id=r["monitor_id"],
            kind=sys.intern(r["kind"]),
            url=r["url"],
            host=sys.intern(r["host"]),
            port=port,
            interval_s=r["interval_s"],
            threshold_s=r["notification_threshold_s"],
            config_version=r["config_version"],
            state=CheckState(
                status=sys.intern(r["status"]),
                error=r["error"],
                last_check_at=r["last_check_at"],
                failing_since=r["failing_since"],
                detected_by=r["detected_by"],
                verified_via=r["verified_via"],
                outage_id=r["outage_id"],
                incident_event_id=r["incident_event_id"],
                renewal_notified_for=r["renewal_notified_for"],
                recovering_since=r["recovering_since"],
                renewal_notified_fingerprints=tuple(r["renewal_notified_fingerprints"] or ()),
            ),
            configured=None if req is None and asserts is None else (req, asserts),
            recovery_s=r["recovery_threshold_s"],
            expiry_percent=r["expiry_threshold_percent"],
            account_id=r["account_id"],
            heartbeat=_beat(r),
            expiry_days=_days(r.get("expiry_threshold_days")),
        )


def _beat(r: Mapping[str, Any]) -> Any:
    """A heartbeat's Beat from the row's ``heartbeat`` column (its heartbeats row as jsonb),
    None for other kinds."""
    raw = r.get("heartbeat") if hasattr(r, "get") else None
    return None if raw is None else beat_of_row(raw)


def _days(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(value)


@dataclass(slots=True)
class Touch:
    """A probe's effect on a check row when nothing but these fields changed."""

    config_version: int
    at: datetime
    status: str
    error: str | None
    meta: dict[str, Any]
