"""Monitors and checks as the store hands them out (the API's view of them): records built
from rows, and the 30-day figures and outages of the statistics endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from engine.domain.stats import average_ms, uptime_percentage


@dataclass(frozen=True, slots=True)
class CheckRecord:
    """One check as stored. ``notification_threshold`` is in seconds for both kinds (the
    certificate expiry threshold is days x 86400)."""

    id: int
    monitor_id: int
    kind: str
    status: str
    error: str | None
    interval: int
    is_enabled: bool
    notification_threshold: int
    last_check_at: datetime | None
    meta: dict[str, Any]
    recovery_threshold: int = 0  # uptime: seconds of good probes before uptime_restored
    expiry_threshold_percent: int = 0  # certificate: percent of its lifetime left
    # Domain expiry: days before expiry of the renewal-due events (None: the defaults).
    expiry_threshold_days: tuple[int, ...] | None = None

    @classmethod
    def from_row(cls, row: asyncpg.Record, id_column: str = "id") -> CheckRecord:
        meta = row["meta"]
        return cls(
            id=row[id_column],
            monitor_id=row["monitor_id"],
            kind=row["kind"],
            status=row["status"],
            error=row["error"],
            interval=row["interval_s"],
            is_enabled=row["is_enabled"],
            notification_threshold=row["notification_threshold_s"],
            last_check_at=row["last_check_at"],
            meta=meta if isinstance(meta, dict) else {},
            recovery_threshold=row["recovery_threshold_s"],
            expiry_threshold_percent=row["expiry_threshold_percent"],
            expiry_threshold_days=_days(row.get("expiry_threshold_days")),
        )


def _days(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(value)


@dataclass(frozen=True, slots=True)
class UptimeFigures:
    """30-day figures of one uptime check."""

    checks_run: int
    responses: int
    response_ms_sum: float
    outage_seconds: float
    enabled_seconds: float
    offline_since: datetime | None

    @classmethod
    def empty(cls) -> UptimeFigures:
        return cls(0, 0, 0.0, 0.0, 0.0, None)

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> UptimeFigures:
        return cls(
            checks_run=int(row["probes"]),
            responses=int(row["responses"]),
            response_ms_sum=float(row["ms_sum"]),
            outage_seconds=float(row["outage_seconds"]),
            enabled_seconds=float(row["enabled_seconds"]),
            offline_since=row["offline_since"],
        )

    @property
    def uptime_percentage(self) -> float:
        return uptime_percentage(self.outage_seconds, self.enabled_seconds, self.checks_run)

    @property
    def average_response_ms(self) -> float:
        return average_ms(self.response_ms_sum, self.responses)


@dataclass(frozen=True, slots=True)
class MonitorRecord:
    """A monitor with its checks by kind (those
    :func:`engine.monitors.checkset.checks_of` gives it) and, on list and get, the uptime
    check's 30-day figures (None for a monitor without one)."""

    id: int
    identifier: str
    alias: str
    url: str
    scheme: str
    host: str
    port: str
    checks: dict[str, CheckRecord]
    uptime: UptimeFigures | None = None
    # The monitor's request and assertions, as stored (engine/monitors/requests.py): None
    # when not set.
    request: Any = None
    assertions: Any = None

    @classmethod
    def from_rows(
        cls, monitor: asyncpg.Record, checks: list[CheckRecord],
        uptime: UptimeFigures | None = None,
    ) -> MonitorRecord:
        return cls(
            id=monitor["id"],
            identifier=monitor["identifier"],
            alias=monitor["alias"],
            url=monitor["url"],
            scheme=monitor["scheme"],
            host=monitor["host"],
            port=monitor["port"],
            checks={c.kind: c for c in checks},
            uptime=uptime,
            request=monitor["request"],
            assertions=monitor["assertions"],
        )


@dataclass(frozen=True, slots=True)
class OutageRecord:
    started_at: datetime
    ended_at: datetime | None
    http_status_code: int | None


@dataclass(frozen=True, slots=True)
class StatisticsRecord:
    """A monitor's statistics as of ``now``: figures and outages (newest first)."""

    now: datetime
    figures: UptimeFigures | None  # None: the monitor has no uptime check
    outages: list[OutageRecord]


def group_monitors(rows: list[asyncpg.Record]) -> list[MonitorRecord]:
    """Rows of monitor x check, ordered by monitor, the uptime check's row (if any)
    carrying the figures, into records."""
    out: list[MonitorRecord] = []
    group: list[asyncpg.Record] = []
    for row in rows:
        if group and row["id"] != group[0]["id"]:
            out.append(monitor_of(group))
            group = []
        group.append(row)
    if group:
        out.append(monitor_of(group))
    return out


def monitor_of(group: list[asyncpg.Record]) -> MonitorRecord:
    checks = [CheckRecord.from_row(r, "check_id") for r in group]
    # A heartbeat monitor's one check stands where the uptime check would.
    uptime = next((UptimeFigures.from_row(r) for r in group
                   if r["kind"] in ("uptime", "heartbeat")), None)
    return MonitorRecord.from_rows(group[0], checks, uptime)
